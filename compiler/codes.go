package compiler

// Diagnostic codes. Each is a stable id with a docs page at
// docs/rules/<id>.md; never reuse or rename one.
const (
	CodeNoPolicy         = "no-policy-files"
	CodeNotUTF8          = "not-utf8"
	CodeSyntax           = "syntax-error"
	CodeWrongPackage     = "wrong-package"
	CodeUnknownKey       = "unknown-key"
	CodeType             = "type-error"
	CodeApprovalOnFetch  = "approval-on-fetch"
	CodeInvalidGlob      = "invalid-glob"
	CodeChannelKind      = "channel-kind"
	CodeUnknownChannel   = "unknown-channel"
	CodeApprovalNoHuman  = "approval-no-channel"
	CodeUINoConsent      = "ui-no-consent"
	CodeInvalidUIPattern = "invalid-ui-pattern"
	CodeUnknownServer    = "unknown-server"
)

// Category groups codes in the rule catalogue.
type Category string

// Categories of diagnostics.
const (
	CategorySource   Category = "source"   // the files cannot be read as a policy
	CategorySchema   Category = "schema"   // keys and types
	CategoryApproval Category = "approval" // approval holds and their channels
	CategoryUI       Category = "ui"       // MCP Apps ui:// resources
	CategoryScope    Category = "scope"    // scopes and narrowing
)

// CodeInfo describes one diagnostic code for the rule catalogue.
type CodeInfo struct {
	ID       string
	Category Category
	Level    Severity
	Summary  string
}

// Codes lists every diagnostic code the compiler emits, in catalogue order.
var Codes = []CodeInfo{
	{CodeNoPolicy, CategorySource, Error, "the policy directory holds no .cue files"},
	{CodeNotUTF8, CategorySource, Error, "a policy file is not valid UTF-8"},
	{CodeSyntax, CategorySource, Error, "a policy file is not valid CUE"},
	{CodeWrongPackage, CategorySource, Error, "a policy file is not in package policy"},
	{CodeUnknownKey, CategorySchema, Error, "a key the schema does not define (often a misspelling)"},
	{CodeType, CategorySchema, Error, "a value of the wrong type or out of range"},
	{CodeApprovalOnFetch, CategoryApproval, Error, "approval_list under prompt or resource: no approval hold exists on a fetch"},
	{CodeInvalidGlob, CategorySchema, Error, "a pattern that is not a valid glob"},
	{CodeChannelKind, CategoryApproval, Error, "a channel that is not exactly one of webhook or approvals_page"},
	{CodeUnknownChannel, CategoryApproval, Error, "a reference to an approval channel that is not defined"},
	{CodeApprovalNoHuman, CategoryApproval, Error, "approval_list entries whose server has no channel that reaches a human"},
	{CodeUINoConsent, CategoryUI, Error, "ui:// resources allowlisted with no consent channel that reaches a human"},
	{CodeInvalidUIPattern, CategoryUI, Error, "a ui allowlist entry that is not exact, prefix* or prefix/"},
	{CodeUnknownServer, CategoryScope, Warning, "rules for a server that mcp_servers does not define never apply"},
}

// LookupCode returns the catalogue entry of a code.
func LookupCode(id string) (CodeInfo, bool) {
	for _, c := range Codes {
		if c.ID == id {
			return c, true
		}
	}
	return CodeInfo{}, false
}
