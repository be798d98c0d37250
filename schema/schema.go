// Package schema embeds the CUE definition of the policy surface.
//
// It is data only: the compiler unifies policies with it, `policyc schema`
// prints it. It must never be evaluated at runtime by the gateway.
package schema

import _ "embed"

// Filename is the name the embedded schema is reported under.
const Filename = "schema/policy.cue"

// Source is the CUE text of the schema; #Policy is the whole policy.
//
//go:embed policy.cue
var Source []byte
