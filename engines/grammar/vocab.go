package grammar

import (
	"bytes"
	"slices"

	"github.com/toyml/toy/engines/tokenizer"
)

// Vocab is what a Matcher needs of a vocabulary: each token's bytes, the end tokens, and a trie
// of the token bytes that a Matcher walks with its state to find every token allowed at once
// (a prefix that does not continue the grammar rules out every token below it). It is immutable
// and safe for concurrent use: build one per tokenizer and share it.
type Vocab struct {
	pieces   [][]byte // per token; nil: never allowed (no bytes of its own)
	ends     []int32  // the tokens that end the text
	trie     []trieNode
	order    []int32 // the tokens with bytes, sorted by their bytes
	maxDepth int
}

// trieNode is a node of the trie in depth-first order: the byte on the edge into it, its depth
// (1 for a token's first byte), the index just past its subtree, and the tokens whose bytes end
// here, order[first : first+count].
type trieNode struct {
	b     byte
	depth uint16
	count uint16
	skip  int32
	first int32
}

// NewVocab makes a Vocab of the tokens' bytes (pieces[id]; nil or empty for a token that never
// matches text, as a control token) and the tokens that end the text (EOS).
func NewVocab(pieces [][]byte, ends ...int32) *Vocab {
	v := &Vocab{pieces: make([][]byte, len(pieces))}
	for id, p := range pieces {
		if len(p) > 0 && len(p) < 1<<16 {
			v.pieces[id] = p
			v.order = append(v.order, int32(id))
		}
	}
	for _, e := range ends {
		if e >= 0 && int(e) < len(pieces) {
			v.ends = append(v.ends, e)
			v.pieces[e] = nil
		}
	}
	v.order = slices.DeleteFunc(v.order, func(id int32) bool { return v.pieces[id] == nil })
	slices.SortStableFunc(v.order, func(a, b int32) int { return bytes.Compare(v.pieces[a], v.pieces[b]) })
	// The trie in depth-first order: each token's bytes below the longest prefix it shares
	// with the one before it (the open path).
	var path []int32 // the trie nodes of the previous token's bytes
	var prev []byte
	for i, id := range v.order {
		p := v.pieces[id]
		common := 0
		for common < len(prev) && common < len(p) && prev[common] == p[common] {
			common++
		}
		for _, n := range path[common:] {
			v.trie[n].skip = int32(len(v.trie))
		}
		path = path[:common]
		for d := common; d < len(p); d++ {
			path = append(path, int32(len(v.trie)))
			v.trie = append(v.trie, trieNode{b: p[d], depth: uint16(d + 1)})
		}
		end := &v.trie[path[len(p)-1]]
		if end.count == 0 {
			end.first = int32(i)
		}
		end.count++
		v.maxDepth = max(v.maxDepth, len(p))
		prev = p
	}
	for _, n := range path {
		v.trie[n].skip = int32(len(v.trie))
	}
	return v
}

// VocabOf is the Vocab of a tokenizer: each token's bytes as Piece gives them without special
// tokens' text (control and unused tokens have none), and the tokenizer's EOS as the end.
func VocabOf(tok *tokenizer.Tokenizer) *Vocab {
	pieces := make([][]byte, tok.VocabSize())
	for id := range pieces {
		if p, err := tok.Piece(int32(id), tokenizer.DecodeOptions{}); err == nil {
			pieces[id] = []byte(p)
		}
	}
	return NewVocab(pieces, tok.EOS())
}

// Size is the number of tokens.
func (v *Vocab) Size() int { return len(v.pieces) }

func (v *Vocab) isEnd(id int32) bool { return slices.Contains(v.ends, id) }

func (v *Vocab) piece(id int32) []byte {
	if id < 0 || int(id) >= len(v.pieces) {
		return nil
	}
	return v.pieces[id]
}
