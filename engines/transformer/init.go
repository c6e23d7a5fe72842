package transformer

// Init is how a trained model's weights start: the standard deviation of the random weights and
// the seed (the Llama spec's init_scale and seed, which checkpoints keep under toy.<arch>.*).
type Init struct {
	Scale float32
	Seed  int
}

func initOf(c Config) Init { return Init{Scale: c.InitScale, Seed: c.Seed} }
