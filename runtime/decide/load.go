package decide

import "github.com/policyc/policyc/runtime/table"

// LoadUnsigned decodes and loads table bytes without any signature check.
// It exists for the developer tools (explain, diff) that read a table the
// user just compiled; the gateway never calls it.
func LoadUnsigned(b []byte) (*Table, error) {
	src, err := table.Decode(b)
	if err != nil {
		return nil, err
	}
	return LoadForInspection(src)
}
