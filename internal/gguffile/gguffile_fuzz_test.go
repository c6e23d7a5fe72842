package gguffile

import "testing"

func FuzzRead(f *testing.F) {
	f.Add(buildFile(f, allValues, someTensors))
	f.Add(buildFile(f, nil, nil))
	f.Add(buildFile(f, []KV{{AlignmentKey, uint32(64)}, {"general.name", "tiny"}}, someTensors[:3]))
	f.Add(buildFile(f, []KV{{AlignmentKey, uint32(1)}}, someTensors[8:]))
	f.Add(head(0, 1).kvU32(AlignmentKey, 1<<29).b)
	f.Add(head(2, 0).tensor("a", []int64{16}, TypeF32, 0).tensor("b", []int64{1}, TypeF32, 64).data(32, 68))
	for _, c := range badFiles {
		f.Add(c.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := readBytes(data)
		if err != nil {
			if file != nil {
				t.Fatalf("Read returned a File and an error: %v", err)
			}
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		// Everything accepted re-encodes and reads back the same. Skip
		// files without tensors whose huge alignment would make Writer pad
		// the header to gigabytes (a file with tensors must hold that
		// padding already).
		if file.DataOffset > int64(len(data))+1<<20 {
			return
		}
		b := reencode(t, file, data)
		again, err := readBytes(b)
		if err != nil {
			t.Fatalf("re-encoded file rejected: %v", err)
		}
		file.Version = Version
		if !sameFile(file, again) {
			t.Fatalf("re-read file differs:\n%+v\n%+v", file, again)
		}
	})
}
