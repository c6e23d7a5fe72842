package decoding

// SetGraphBucket rounds the decoder's cache lengths to multiples of n cells instead of
// kvBucket, so that the tests of tiny models reach several step graphs and their reuse
// (decodingtest.NewDecoder).
func (d *Decoder) SetGraphBucket(n int) { d.bucket = n }
