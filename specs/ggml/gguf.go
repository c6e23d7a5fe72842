package ggml

import . "github.com/toyml/toy/specs/spec"

// GGUFFuncs are ggml's GGUF file API (gguf.h), bound as GGUF*: reading and writing the
// key-value metadata and tensor infos of GGUF files. Keys and tensors are addressed by id
// (0 ≤ id < GGUFGetNKv or GGUFGetNTensors); the Find functions return -1 when absent. The
// typed getters abort the process on a type mismatch, so check GGUFGetKvType first.
//
//kernelgen:functions prefix=gguf_ goprefix=GGUF
type GGUFFuncs interface {
	// ---- opening and closing ----

	// InitEmpty makes an empty GGUF context to fill and write.
	InitEmpty() GGUF
	// InitFromFile reads the GGUF file fname; see GGUFInitParams for how tensors are loaded.
	// It returns nil (and logs) if the file cannot be read or is invalid.
	InitFromFile(fname string, params GGUFInitParams) GGUF
	// Free releases ctx (not the Context made by InitFromFile).
	Free(ctx GGUF)
	// TypeName is the name of the value type typ (e.g. "u32", "str", "arr").
	TypeName(typ GGUFType) string

	// ---- file layout ----

	// GetVersion is the file format version (3).
	GetVersion(ctx Const[GGUF]) uint32
	// GetAlignment is the alignment of tensor data in bytes (general.alignment, default 32).
	GetAlignment(ctx Const[GGUF]) Size
	// GetDataOffset is the byte offset of the tensor data blob in the file; tensor id's data
	// starts at GetDataOffset + GetTensorOffset(id).
	GetDataOffset(ctx Const[GGUF]) Size
	// GetMetaSize is the size in bytes of everything before the tensor data (header, key-value
	// pairs, tensor infos, padding).
	GetMetaSize(ctx Const[GGUF]) Size
	// GetMetaData writes the GetMetaSize bytes of metadata to data.
	GetMetaData(ctx Const[GGUF], data Ptr)

	// ---- keys ----

	// GetNKv is the number of key-value pairs.
	GetNKv(ctx Const[GGUF]) int64
	// FindKey is the id of key, or -1 if it is absent.
	FindKey(ctx Const[GGUF], key string) int64
	// GetKey is the name of key keyID.
	GetKey(ctx Const[GGUF], keyID int64) string
	// GetKvType is the value type of key keyID.
	GetKvType(ctx Const[GGUF], keyID int64) GGUFType
	// GetArrType is the element type of the array key keyID.
	GetArrType(ctx Const[GGUF], keyID int64) GGUFType

	// ---- values (abort on a type mismatch) ----

	// GetValU8 is the uint8 value of key keyID.
	GetValU8(ctx Const[GGUF], keyID int64) uint8
	// GetValI8 is the int8 value of key keyID.
	GetValI8(ctx Const[GGUF], keyID int64) int8
	// GetValU16 is the uint16 value of key keyID.
	GetValU16(ctx Const[GGUF], keyID int64) uint16
	// GetValI16 is the int16 value of key keyID.
	GetValI16(ctx Const[GGUF], keyID int64) int16
	// GetValU32 is the uint32 value of key keyID.
	GetValU32(ctx Const[GGUF], keyID int64) uint32
	// GetValI32 is the int32 value of key keyID.
	GetValI32(ctx Const[GGUF], keyID int64) int32
	// GetValF32 is the float32 value of key keyID.
	GetValF32(ctx Const[GGUF], keyID int64) float32
	// GetValU64 is the uint64 value of key keyID.
	GetValU64(ctx Const[GGUF], keyID int64) uint64
	// GetValI64 is the int64 value of key keyID.
	GetValI64(ctx Const[GGUF], keyID int64) int64
	// GetValF64 is the float64 value of key keyID.
	GetValF64(ctx Const[GGUF], keyID int64) float64
	// GetValBool is the bool value of key keyID.
	GetValBool(ctx Const[GGUF], keyID int64) bool
	// GetValStr is the string value of key keyID.
	GetValStr(ctx Const[GGUF], keyID int64) string
	// GetValData is the address of the single (non-array) value of key keyID.
	GetValData(ctx Const[GGUF], keyID int64) Const[Ptr]
	// GetArrN is the number of elements of the array key keyID.
	GetArrN(ctx Const[GGUF], keyID int64) Size
	// GetArrData is the address of the first element of the array key keyID (not for string
	// arrays); bools are stored as one byte each.
	GetArrData(ctx Const[GGUF], keyID int64) Const[Ptr]
	// GetArrDataN is the size in bytes of the data of the array key keyID (ollama addition).
	//kernelgen:optional
	GetArrDataN(ctx Const[GGUF], keyID int64) Size
	// GetArrStr is element i of the string array key keyID.
	GetArrStr(ctx Const[GGUF], keyID int64, i Size) string

	// ---- tensor infos ----

	// GetNTensors is the number of tensors described in the file.
	GetNTensors(ctx Const[GGUF]) int64
	// FindTensor is the id of the tensor called name, or -1 if it is absent.
	FindTensor(ctx Const[GGUF], name string) int64
	// GetTensorOffset is the byte offset of tensor tensorID's data within the data blob.
	GetTensorOffset(ctx Const[GGUF], tensorID int64) Size
	// GetTensorName is the name of tensor tensorID.
	GetTensorName(ctx Const[GGUF], tensorID int64) string
	// GetTensorType is the element type of tensor tensorID.
	GetTensorType(ctx Const[GGUF], tensorID int64) Type
	// GetTensorSize is the size in bytes of tensor tensorID's data.
	GetTensorSize(ctx Const[GGUF], tensorID int64) Size

	// ---- editing and writing ----

	// RemoveKey removes key and returns the id it had, or -1 if it was absent.
	RemoveKey(ctx GGUF, key string) int64
	// SetValU8 sets key to a uint8, replacing any old value (new keys go last).
	SetValU8(ctx GGUF, key string, val uint8)
	// SetValI8 sets key to an int8.
	SetValI8(ctx GGUF, key string, val int8)
	// SetValU16 sets key to a uint16.
	SetValU16(ctx GGUF, key string, val uint16)
	// SetValI16 sets key to an int16.
	SetValI16(ctx GGUF, key string, val int16)
	// SetValU32 sets key to a uint32.
	SetValU32(ctx GGUF, key string, val uint32)
	// SetValI32 sets key to an int32.
	SetValI32(ctx GGUF, key string, val int32)
	// SetValF32 sets key to a float32.
	SetValF32(ctx GGUF, key string, val float32)
	// SetValU64 sets key to a uint64.
	SetValU64(ctx GGUF, key string, val uint64)
	// SetValI64 sets key to an int64.
	SetValI64(ctx GGUF, key string, val int64)
	// SetValF64 sets key to a float64.
	SetValF64(ctx GGUF, key string, val float64)
	// SetValBool sets key to a bool.
	SetValBool(ctx GGUF, key string, val bool)
	// SetValStr sets key to a string (copied).
	SetValStr(ctx GGUF, key string, val string)
	// SetArrData sets key to an array of n elements of type typ (not GGUFTypeString), copying
	// them from data.
	SetArrData(ctx GGUF, key string, typ GGUFType, data Const[Ptr], n Size)
	// SetArrStr sets key to an array of the first n strings of data (copied).
	SetArrStr(ctx GGUF, key string, data []string, n Size)
	// SetKv copies every key-value pair of src into ctx, replacing existing keys.
	SetKv(ctx GGUF, src Const[GGUF])
	// AddTensor adds t's info (name, type, shape) to ctx, after the tensors already added; the
	// name must be unique (a duplicate aborts). ctx keeps a copy of t's struct and reads the
	// data through it when the file is written, so t's data and buffer must stay valid (and t
	// contiguous) until then.
	AddTensor(ctx GGUF, t Const[Tensor])
	// SetTensorType changes the element type of the tensor called name and recomputes the
	// offsets of the tensors after it.
	SetTensorType(ctx GGUF, name string, typ Type)
	// SetTensorData makes the tensor called name take its data (GetTensorSize bytes) from data
	// when written.
	SetTensorData(ctx GGUF, name string, data Const[Ptr])
	// WriteToFile writes ctx to fname (only the metadata when onlyMeta is true), reading tensor
	// data from the tensors' backend buffers; it returns false on failure.
	WriteToFile(ctx Const[GGUF], fname string, onlyMeta bool) bool
}
