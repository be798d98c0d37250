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
	CodeWebhookPlainHTTP = "webhook-not-https"
	CodeApprovalNoHuman  = "approval-no-channel"
	CodeUINoConsent      = "ui-no-consent"
	CodeInvalidUIPattern = "invalid-ui-pattern"
	CodeUnknownServer    = "unknown-server"
	CodeServerSeparator  = "server-name-separator"
	CodeAuditMode        = "audit-mode"
	CodeTooLarge         = "policy-too-large"

	// Reachability: rules that cannot take effect (reach.go).
	CodeEmptyPattern       = "empty-pattern"
	CodeDuplicatePattern   = "duplicate-pattern"
	CodeShadowedRule       = "shadowed-rule"
	CodePartlyShadowed     = "partly-shadowed"
	CodeApprovalNeverAsked = "approval-never-asked"
	CodeAllowNeverAllows   = "allow-never-allows"
	CodeNarrowingNoEffect  = "narrowing-no-effect"
	CodeRedundantDeny      = "redundant-deny"
	CodeEmptyGroup         = "empty-group"
	CodeUIResourceDenied   = "ui-resource-denied"
	CodeApprovalTimeout    = "approval-timeout-too-long"
	CodeReachIncomplete    = "reach-incomplete"

	// The catalogue rules: the policy checked against the catalogue
	// snapshot of what the servers offer (package lint).
	CodePatternNotCatalogued = "pattern-not-in-catalog"
	CodeItemFallsToDefault   = "item-falls-to-default"
	CodeDestructiveAllowed   = "destructive-allowed"
	CodeApprovalOnReadOnly   = "approval-on-read-only"
	CodeInputSchemaChanged   = "input-schema-changed"

	// The linter's own codes, about its ignore comments (package lint).
	CodeUnusedIgnore  = "unused-ignore"
	CodeInvalidIgnore = "invalid-ignore"

	// The gateway configuration's code: every problem of a configuration
	// read by policyc gateway or policyc catalog pull (package cmd), which
	// is not a policy file.
	CodeGatewayConfig = "gateway-config"
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
	CategoryReach    Category = "reach"    // rules that cannot take effect
	CategoryCatalog  Category = "catalog"  // the policy against the catalogue snapshot
	CategoryLint     Category = "lint"     // the linter's ignore comments
	CategoryGateway  Category = "gateway"  // the gateway's configuration
)

// CodeInfo describes one diagnostic code for the rule catalogue.
type CodeInfo struct {
	ID       string
	Category Category
	Level    Severity
	Summary  string
}

// Codes lists every diagnostic code the compiler and the linter emit, in
// catalogue order. A code whose level is Error stops compilation; the lint
// configuration cannot lower it or ignore it, so a policy that does not
// compile never lints clean.
var Codes = []CodeInfo{
	{CodeNoPolicy, CategorySource, Error, "the policy directory holds no .cue files"},
	{CodeNotUTF8, CategorySource, Error, "a policy file is not valid UTF-8"},
	{CodeSyntax, CategorySource, Error, "a policy file is not valid CUE"},
	{CodeWrongPackage, CategorySource, Error, "a policy file is not in package policy"},
	{CodeTooLarge, CategorySource, Error, "lists or structs so large that CUE's evaluation of them would pass the compiler's budget"},
	{CodeUnknownKey, CategorySchema, Error, "a key the schema does not define (often a misspelling), or one written with a ? or ! marker"},
	{CodeType, CategorySchema, Error, "a value of the wrong type or out of range"},
	{CodeApprovalOnFetch, CategoryApproval, Error, "approval_list under prompt or resource: no approval hold exists on a fetch"},
	{CodeInvalidGlob, CategorySchema, Error, "a pattern that is not a valid glob"},
	{CodeChannelKind, CategoryApproval, Error, "a channel that is not exactly one of webhook or approvals_page"},
	{CodeUnknownChannel, CategoryApproval, Error, "a reference to an approval channel that is not defined"},
	{CodeApprovalNoHuman, CategoryApproval, Error, "approval_list entries whose server has no channel that reaches a human"},
	{CodeWebhookPlainHTTP, CategoryApproval, Warning, "a webhook over plain http to another machine: approval requests, argument previews among them, travel in clear text"},
	{CodeUINoConsent, CategoryUI, Error, "ui:// resources allowlisted with no consent channel that reaches a human"},
	{CodeInvalidUIPattern, CategoryUI, Error, "a ui allowlist entry that is not exact, prefix* or prefix/"},
	{CodeUnknownServer, CategoryScope, Warning, "rules for a server that mcp_servers does not define never apply"},
	{CodeAuditMode, CategoryScope, Warning, "a server in audit mode: what its rules deny or hold is served"},
	{CodeServerSeparator, CategoryScope, Warning, "a server name with \"__\" or a trailing \"_\": the gateway cannot namespace its tools"},
	{CodeEmptyPattern, CategoryReach, Error, "a pattern that can match no name"},
	{CodeDuplicatePattern, CategoryReach, Warning, "a pattern written twice in the same block: the second never decides"},
	{CodeShadowedRule, CategoryReach, Warning, "a rule wholly shadowed by higher-precedence rules of the same scope, server and kind"},
	{CodePartlyShadowed, CategoryReach, Info, "a rule partly shadowed by higher-precedence rules of its block: one name it decides, one it loses"},
	{CodeApprovalNeverAsked, CategoryApproval, Warning, "an approval entry that a deny always beats: the human is never asked"},
	{CodeAllowNeverAllows, CategoryReach, Warning, "an allow entry that an approval or a deny of another scope always beats"},
	{CodeNarrowingNoEffect, CategoryScope, Warning, "a global, group or principal rule that tries to widen access or repeats a hold: it changes no decision"},
	{CodeRedundantDeny, CategoryScope, Info, "a global, group or principal deny entry whose every name is already denied"},
	{CodeEmptyGroup, CategoryScope, Warning, "a group with rules but no members: its rules apply only to principals whose access token names it"},
	{CodeUIResourceDenied, CategoryUI, Warning, "a resource allow entry that admits ui:// URIs the ui allowlist does not: they are denied"},
	{CodeApprovalTimeout, CategoryApproval, Warning, "approval holds longer than common MCP hosts wait for a tool result"},
	{CodeReachIncomplete, CategoryReach, Warning, "rules the analysis could not settle: one of them may never take effect unreported"},
	{CodePatternNotCatalogued, CategoryCatalog, Warning, "a pattern that matches no catalogued item of its server and kind (often a misspelling)"},
	{CodeItemFallsToDefault, CategoryCatalog, Info, "catalogued items that no rule names and a default allows: served unnamed, with whatever the server adds later"},
	{CodeDestructiveAllowed, CategoryCatalog, Warning, "a tool whose annotations say it may be destructive, allowed without approval"},
	{CodeApprovalOnReadOnly, CategoryCatalog, Info, "an approval on a tool whose annotations say it is read-only"},
	{CodeInputSchemaChanged, CategoryCatalog, Warning, "a catalogued tool whose input schema changed since the snapshot committed at HEAD"},
	{CodeUnusedIgnore, CategoryLint, Warning, "a policyc:ignore comment that silences no finding"},
	{CodeInvalidIgnore, CategoryLint, Warning, "a policyc:ignore comment without a known rule id and a reason, or for a rule that cannot be ignored"},
	{CodeGatewayConfig, CategoryGateway, Error, "a gateway configuration problem: an unknown key, a wrong value, a program or file that cannot be used"},
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
