package decode

import (
	"testing"
)

// FuzzRaw: any bytes either decode as wire format or fail with an error;
// neither Raw nor FormatRaw panics.
func FuzzRaw(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x03, 'a', 'b', 'c'})
	f.Add([]byte{0x0a, 0x02, 0x08, 0x01, 0x10, 0x96, 0x01})
	f.Add([]byte{0x0b, 0x0c})
	f.Fuzz(func(t *testing.T, b []byte) {
		fs, err := Raw(b)
		if err == nil {
			_ = FormatRaw(fs)
		}
	})
}

// FuzzDecode: any value at any path decodes or fails with an error,
// through the builtin registry; nothing panics.
func FuzzDecode(f *testing.F) {
	r := Builtin()
	f.Add("keyspaces/ks/Keyspace", []byte{0x0a, 0x03, 'a', 'b', 'c'})
	f.Add("cells/zone1/CellInfo", []byte{0x0a, 0x09, '1', '2', '7', '.', '0', '.', '0', '.', '1'})
	f.Add("keyspaces/ks/shards/-80/locks/x", []byte(`{"Action":"x"}`))
	f.Add("elections/e/x", []byte("text\n"))
	f.Add("tablets/zone1-100/Tablet", []byte{0x12, 0x02, 0x08, 0x64})
	f.Fuzz(func(t *testing.T, path string, b []byte) {
		_, _ = r.Decode(path, b, true)
		_, _ = r.Decode(path, b, false)
		_, _ = Text(b, true)
	})
}
