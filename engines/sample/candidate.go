package sample

// candidate is a token that is still in the running, with its logit (after
// penalty and temperature) and its probability once the softmax has run.
type candidate struct {
	id    int32
	logit float64
	p     float64
}

// better orders candidates by descending logit, ties by ascending token id.
func better(a, b candidate) bool {
	return a.logit > b.logit || (a.logit == b.logit && a.id < b.id)
}

func cmpCandidates(a, b candidate) int {
	switch {
	case better(a, b):
		return -1
	case better(b, a):
		return 1
	}
	return 0
}
