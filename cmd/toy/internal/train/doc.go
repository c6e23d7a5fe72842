// Package train holds toy's training commands: toy train (train.go: a LLaMA/SmolLM2-shaped or
// GPT-2 model from scratch; -recipe dflash, dflash.go: a DFlash drafter for a target model),
// toy train-vit and toy classify (vit.go: a ViT image classifier and its predictions), and toy
// finetune (finetune.go: LoRA, full fine-tune or warm start). job.go joins an MPI job when toy
// runs under mpirun (job_cuda.go: NCCL on a cuda build). common.go holds what the commands
// share: the flags a -resume command line may set, and whether progress goes to a terminal.
// The model families and presets the commands share with toy bench train are cli's.
package train
