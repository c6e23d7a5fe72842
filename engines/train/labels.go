package train

import "fmt"

// Label tensors built here are dense float32 probabilities in ggml's [V, N] layout for
// ggml_cross_entropy_loss: row i, the label of position i, is labels[i*V : (i+1)*V], and
// every row is one-hot, so it sums to 1 as ggml's backward assumes.

// oneHot returns len(ids) one-hot rows of width width (≥ 1), or an error naming what (e.g.
// "target", "class") and the index index(i) of the first id outside [0, width).
func oneHot(ids []int32, width int, what string, index func(i int) int) ([]float32, error) {
	out := make([]float32, len(ids)*width)
	for i, id := range ids {
		if id < 0 || int(id) >= width {
			return nil, fmt.Errorf("train: %s id %d at position %d is outside [0, %d)", what, id, index(i), width)
		}
		out[i*width+int(id)] = 1
	}
	return out, nil
}

// FixedTarget returns n one-hot rows of width vocab that all mark target, e.g. to train
// every position towards one token. n must be at least 1 and target in [0, vocab).
func FixedTarget(n, vocab int, target int32) ([]float32, error) {
	if n < 1 {
		return nil, fmt.Errorf("train: fixed-target labels need at least 1 row, got %d", n)
	}
	if vocab < 1 {
		return nil, fmt.Errorf("train: vocabulary size %d must be at least 1", vocab)
	}
	if target < 0 || int(target) >= vocab {
		return nil, fmt.Errorf("train: fixed target id %d is outside [0, %d)", target, vocab)
	}
	out := make([]float32, n*vocab)
	for i := range n {
		out[i*vocab+int(target)] = 1
	}
	return out, nil
}

// OneHotClass returns classification labels: len(classes) one-hot rows of width nClasses,
// row i marking classes[i]. It needs at least one class id, and every id must lie in
// [0, nClasses) (the error names the position and id).
func OneHotClass(classes []int32, nClasses int) ([]float32, error) {
	if len(classes) == 0 {
		return nil, fmt.Errorf("train: class labels need at least 1 class id")
	}
	if nClasses < 1 {
		return nil, fmt.Errorf("train: number of classes %d must be at least 1", nClasses)
	}
	return oneHot(classes, nClasses, "class", func(i int) int { return i })
}
