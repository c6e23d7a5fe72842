package tokenizer

import (
	"container/heap"
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"
)

// DefaultSpecial is the special token Train adds when TrainOptions.Special
// is nil: GPT-2's end-of-text token, which is then both BOS and EOS.
const DefaultSpecial = "<|endoftext|>"

// TrainOptions control Train.
type TrainOptions struct {
	// Pre is the pre-tokenizer (a tokenizer.ggml.pre value); "" is "gpt-2".
	Pre string
	// Special are the control tokens, ids 0, 1, ... in this order. nil means
	// {DefaultSpecial}; an empty non-nil slice means none. Occurrences in
	// the training texts are cut out before counting, as Encode with
	// ParseSpecial would.
	Special []string
	// BOS and EOS name the special tokens that begin and end a sequence;
	// "" means the first special token (none if there is none).
	BOS, EOS string
	// AddBOS and AddEOS set the vocabulary's add_bos_token and
	// add_eos_token.
	AddBOS, AddEOS bool
	// MinFrequency is the least number of times a pair must occur to be
	// merged; 0 means 2.
	MinFrequency int
}

// Train learns a byte-level BPE vocabulary of vocabSize tokens (special and
// byte tokens included) from texts. Each text is pre-tokenized on its own;
// Train does not keep the slices, so an iterator may reuse its buffer (for
// [][]byte, pass slices.Values(docs)). The vocabulary is smaller than
// vocabSize when no pair occurs MinFrequency times any more.
//
// Training takes time about linear in the text: the distinct chunks are
// counted once, the pair counts are kept up to date as pairs merge (a merge
// rewrites only the chunks that hold its pair, each in one pass), and a
// priority queue gives the next pair, as Hugging Face's tokenizers trains.
func Train(texts iter.Seq[[]byte], vocabSize int, opts TrainOptions) (*Tokenizer, error) {
	return TrainContext(context.Background(), texts, vocabSize, opts)
}

// TrainContext is Train, stopped when ctx is done: between texts while they
// are counted and between merges, with an error wrapping ctx.Err().
func TrainContext(ctx context.Context, texts iter.Seq[[]byte], vocabSize int, opts TrainOptions) (*Tokenizer, error) {
	if opts.Pre == "" {
		opts.Pre = "gpt-2"
	}
	pre, err := lookupPre(opts.Pre)
	if err != nil {
		return nil, err
	}
	special := opts.Special
	if special == nil {
		special = []string{DefaultSpecial}
	}
	minFreq := int64(opts.MinFrequency)
	if minFreq <= 0 {
		minFreq = 2
	}
	nBase := len(special) + 256
	if vocabSize < nBase {
		return nil, fmt.Errorf("tokenizer: vocabulary size %d is below the %d special and byte tokens", vocabSize, nBase)
	}
	if vocabSize > 1<<31-1 {
		return nil, fmt.Errorf("tokenizer: vocabulary size %d is too large", vocabSize)
	}

	// The tokens, as raw bytes: specials, then the bytes.
	var raws []string
	rawID := make(map[string]int32, vocabSize)
	types := make([]TokenType, 0, vocabSize)
	for _, s := range special {
		if s == "" {
			return nil, fmt.Errorf("tokenizer: empty special token")
		}
		if _, dup := rawID[s]; dup {
			return nil, fmt.Errorf("tokenizer: special token %q given twice", s)
		}
		rawID[s] = int32(len(raws))
		raws = append(raws, s)
		types = append(types, TypeControl)
	}
	specialID := func(s, what string) (int32, error) {
		if s == "" {
			if len(special) == 0 {
				return -1, nil
			}
			return 0, nil
		}
		if i := slices.Index(special, s); i >= 0 {
			return int32(i), nil
		}
		return -1, fmt.Errorf("tokenizer: %s %q is not one of the special tokens", what, s)
	}
	bos, err := specialID(opts.BOS, "BOS")
	if err != nil {
		return nil, err
	}
	eos, err := specialID(opts.EOS, "EOS")
	if err != nil {
		return nil, err
	}
	if (opts.AddBOS && bos < 0) || (opts.AddEOS && eos < 0) {
		return nil, fmt.Errorf("tokenizer: AddBOS or AddEOS without special tokens")
	}
	// The byte tokens are normal tokens; a special token's raw text may be a
	// single byte too, so they are looked up by mapped form apart.
	byteBase := int32(len(raws))
	for b := 0; b < 256; b++ {
		raws = append(raws, string([]byte{byte(b)}))
		types = append(types, TypeNormal)
	}
	normalID := make(map[string]int32, vocabSize)
	for b := 0; b < 256; b++ {
		normalID[raws[int(byteBase)+b]] = byteBase + int32(b)
	}

	// Count the distinct chunks.
	words, err := countChunks(ctx, texts, pre, special)
	if err != nil {
		return nil, err
	}
	tr := trainer{raws: raws}
	tr.init(words, byteBase)

	isSpecial := make(map[string]bool, len(special))
	for _, s := range special {
		isSpecial[s] = true
	}
	var merges []string
	for len(raws) < vocabSize {
		if err := ctx.Err(); err != nil {
			return nil, interrupted(err)
		}
		p, cnt, ok := tr.best()
		if !ok || cnt < minFreq {
			break
		}
		a, b := tr.pairs[p].a, tr.pairs[p].b
		joined := raws[a] + raws[b]
		if isSpecial[MapBytes(joined)] {
			// Its mapped form would clash with a special token's text.
			tr.pairs[p].banned = true
			continue
		}
		id, exists := normalID[joined]
		if !exists {
			id = int32(len(raws))
			raws = append(raws, joined)
			types = append(types, TypeNormal)
			normalID[joined] = id
			tr.raws = raws
		}
		merges = append(merges, MapBytes(raws[a])+" "+MapBytes(raws[b]))
		tr.merge(p, id)
	}

	tokens := make([]string, len(raws))
	for i, r := range raws {
		if types[i] == TypeNormal {
			tokens[i] = MapBytes(r)
		} else {
			tokens[i] = r
		}
	}
	return New(Vocab{
		Pre: pre.name, Tokens: tokens, Types: types, Merges: merges,
		BOS: bos, EOS: eos, UNK: -1, PAD: -1, AddBOS: opts.AddBOS, AddEOS: opts.AddEOS,
	})
}

// word is a distinct chunk of the corpus: its symbols and count.
type word struct {
	syms []int32
	n    int64
}

// interrupted is the error of training stopped by its context.
func interrupted(err error) error { return fmt.Errorf("tokenizer: training interrupted: %w", err) }

// countChunks pre-tokenizes the texts and counts their distinct chunks.
func countChunks(ctx context.Context, texts iter.Seq[[]byte], pre preTok, special []string) ([]word, error) {
	// Longest first, as Encode matches them.
	specials := slices.Clone(special)
	slices.SortStableFunc(specials, func(a, b string) int { return len(b) - len(a) })

	index := make(map[string]int32)
	var chunks []string
	var counts []int64
	var sp splitter
	countText := func(s string) {
		ends := sp.split(pre.stages, s)
		prev := 0
		for _, e := range ends {
			c := s[prev:e]
			prev = e
			if i, ok := index[c]; ok {
				counts[i]++
				continue
			}
			c = strings.Clone(c)
			index[c] = int32(len(chunks))
			chunks = append(chunks, c)
			counts = append(counts, 1)
		}
	}
	var cut func(s string, k int)
	cut = func(s string, k int) {
		for ; k < len(specials); k++ {
			if strings.Contains(s, specials[k]) {
				for _, part := range strings.Split(s, specials[k]) {
					if part != "" {
						cut(part, k+1)
					}
				}
				return
			}
		}
		countText(s)
	}
	for text := range texts {
		if err := ctx.Err(); err != nil {
			return nil, interrupted(err)
		}
		if len(text) == 0 {
			continue
		}
		cut(string(text), 0)
	}
	words := make([]word, len(chunks))
	for i, c := range chunks {
		w := word{syms: make([]int32, len(c)), n: counts[i]}
		for j := 0; j < len(c); j++ {
			w.syms[j] = int32(c[j])
		}
		words[i] = w
	}
	return words, nil
}

// pairInfo is one adjacent pair of tokens and where it occurs.
type pairInfo struct {
	a, b  int32
	count int64
	words []int32 // words that held the pair at some point (may repeat)
	stamp int32   // the last merge step that touched the pair
	// banned pairs are never merged.
	banned bool
}

// trainer keeps the pair counts of BPE training up to date.
type trainer struct {
	raws    []string // token bytes, for ties
	words   []word
	pairs   []pairInfo
	index   map[uint64]int32
	heap    pairHeap
	step    int32
	seen    []int32 // the last step that merged in each word
	touched []int32
}

func (tr *trainer) init(words []word, byteBase int32) {
	tr.words = words
	tr.index = make(map[uint64]int32)
	tr.seen = make([]int32, len(words))
	tr.heap.tr = tr
	for wi := range words {
		w := &words[wi]
		for j := range w.syms {
			w.syms[j] += byteBase
		}
		for j := 0; j+1 < len(w.syms); j++ {
			tr.add(w.syms[j], w.syms[j+1], w.n, int32(wi))
		}
	}
	for p := range tr.pairs {
		tr.heap.items = append(tr.heap.items, heapItem{pair: int32(p), count: tr.pairs[p].count})
	}
	heap.Init(&tr.heap)
	tr.step = 1
}

// add adds n to the count of pair (a, b), which word wi holds.
func (tr *trainer) add(a, b int32, n int64, wi int32) {
	key := pairKey(a, b)
	p, ok := tr.index[key]
	if !ok {
		p = int32(len(tr.pairs))
		tr.index[key] = p
		tr.pairs = append(tr.pairs, pairInfo{a: a, b: b})
	}
	pi := &tr.pairs[p]
	pi.count += n
	if n > 0 {
		if k := len(pi.words); k == 0 || pi.words[k-1] != wi {
			pi.words = append(pi.words, wi)
		}
		if pi.stamp != tr.step {
			pi.stamp = tr.step
			tr.touched = append(tr.touched, p)
		}
	}
}

// best returns the most frequent pair, ties broken by the pair's bytes.
func (tr *trainer) best() (p int32, count int64, ok bool) {
	for tr.heap.Len() > 0 {
		it := tr.heap.items[0]
		cur := tr.pairs[it.pair].count
		if tr.pairs[it.pair].banned {
			cur = 0
		}
		if cur == it.count {
			return it.pair, cur, true
		}
		// Stale: counts only fall for pairs already queued.
		if cur > 0 {
			tr.heap.items[0].count = cur
			heap.Fix(&tr.heap, 0)
		} else {
			heap.Pop(&tr.heap)
		}
	}
	return 0, 0, false
}

// merge replaces pair p by token id in every word and updates the counts.
func (tr *trainer) merge(p, id int32) {
	tr.step++
	tr.touched = tr.touched[:0]
	a, b := tr.pairs[p].a, tr.pairs[p].b
	list := tr.pairs[p].words
	tr.pairs[p].words = nil
	for _, wi := range list {
		if tr.seen[wi] == tr.step {
			continue
		}
		tr.seen[wi] = tr.step
		w := &tr.words[wi]
		s := w.syms
		n := w.n
		// One pass, left to right, rewriting the word in place: out (which
		// shares s's array) is what has been read so far, merged; it never
		// catches up with the reading. Removing each merged symbol by
		// moving the rest of the word made a word of one repeated character
		// cost its length squared.
		out := s[:0]
		for i := 0; i < len(s); {
			if i+1 == len(s) || s[i] != a || s[i+1] != b {
				out = append(out, s[i])
				i++
				continue
			}
			// The previous symbol is already merged if the previous pair was.
			if len(out) > 0 {
				prev := out[len(out)-1]
				tr.add(prev, a, -n, wi)
				tr.add(prev, id, n, wi)
			}
			tr.add(a, b, -n, wi)
			if i+2 < len(s) {
				tr.add(b, s[i+2], -n, wi)
				tr.add(id, s[i+2], n, wi)
			}
			out = append(out, id)
			i += 2
		}
		w.syms = out
	}
	// Pairs that gained are new (they hold id): queue them.
	for _, q := range tr.touched {
		if c := tr.pairs[q].count; c > 0 {
			heap.Push(&tr.heap, heapItem{pair: q, count: c})
		}
	}
}

type heapItem struct {
	pair  int32
	count int64
}

// pairHeap orders pairs by count, most first, then by their bytes.
type pairHeap struct {
	items []heapItem
	tr    *trainer
}

func (h *pairHeap) Len() int { return len(h.items) }
func (h *pairHeap) Less(i, j int) bool {
	x, y := h.items[i], h.items[j]
	if x.count != y.count {
		return x.count > y.count
	}
	px, py := &h.tr.pairs[x.pair], &h.tr.pairs[y.pair]
	if c := strings.Compare(h.tr.raws[px.a], h.tr.raws[py.a]); c != 0 {
		return c < 0
	}
	return h.tr.raws[px.b] < h.tr.raws[py.b]
}
func (h *pairHeap) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *pairHeap) Push(x any)    { h.items = append(h.items, x.(heapItem)) }
func (h *pairHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}
