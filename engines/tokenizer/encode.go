package tokenizer

// Encode returns the token ids of text. text may hold any bytes: invalid
// UTF-8 is encoded byte by byte. A byte that no token stands for is encoded
// as the UNK token if the vocabulary has one and dropped otherwise (a
// trained vocabulary holds all 256 bytes).
func (t *Tokenizer) Encode(text string, opts EncodeOptions) []int32 {
	if t.spm {
		return t.encodeSPM(text, opts)
	}
	if t.wpm {
		return t.encodeWPM(text, opts)
	}
	out := make([]int32, 0, len(text)/3+2)
	if opts.AddSpecial && t.v.AddBOS {
		out = append(out, t.v.BOS)
	}
	e := encoder{t: t}
	t.partition(text, opts.ParseSpecial, func(frag string, special int32) {
		if special >= 0 {
			out = append(out, special)
			return
		}
		out = e.encodeText(out, frag)
	})
	if opts.AddSpecial && t.v.AddEOS {
		out = append(out, t.v.EOS)
	}
	return out
}
