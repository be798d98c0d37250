package approval

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// BenchmarkNewPreview: the preview of a call's arguments with many keys
// (what a held call with the largest arguments costs the gateway).
func BenchmarkNewPreview(b *testing.B) {
	for _, n := range []int{10, 1000, 100000} {
		args := map[string]string{}
		for i := range n {
			args[fmt.Sprintf("key-%06d", i)] = strings.Repeat("v", 100)
		}
		in, _ := json.Marshal(args)
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				if _, ok := NewPreview(in); !ok {
					b.Fatal("no preview")
				}
			}
		})
	}
}
