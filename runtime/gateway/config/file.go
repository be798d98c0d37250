package config

import (
	"reflect"
	"strings"

	"cuelang.org/go/cue"
)

// gatewayFile is a gateway configuration as written, decoded after the
// schema accepted it.
type gatewayFile struct {
	Table                 string                  `json:"table"`
	Trust                 []string                `json:"trust"`
	StateDir              string                  `json:"state_dir"`
	DecisionLog           string                  `json:"decision_log"`
	Upstreams             map[string]upstreamFile `json:"upstreams"`
	Front                 frontFile               `json:"front"`
	Approvals             *approvalsFile          `json:"approvals"`
	State                 *stateFile              `json:"state"`
	Observe               *observeFile            `json:"observe"`
	CallTimeoutSeconds    int                     `json:"call_timeout_seconds"`
	ConnectTimeoutSeconds int                     `json:"connect_timeout_seconds"`
}

type approvalsFile struct {
	Admin *struct {
		Address   string `json:"address"`
		PublicURL string `json:"public_url"`
		Approvers map[string]struct {
			TokenSHA256 []string `json:"token_sha256"`
		} `json:"approvers"`
		OAuth          *adminOAuthFile `json:"oauth"`
		TrustedProxies []string        `json:"trusted_proxies"`
	} `json:"admin"`
	WebhookSecretEnv         string         `json:"webhook_secret_env"`
	ConsentWaitSeconds       int            `json:"consent_wait_seconds"`
	ApproveOnceWindowSeconds int            `json:"approve_once_window_seconds"`
	HoldInPlaceSeconds       int            `json:"hold_in_place_seconds"`
	HoldWithProgressSeconds  int            `json:"hold_with_progress_seconds"`
	HoldInPlacePrincipals    map[string]int `json:"hold_in_place_principals"`
	HoldInPlaceClients       map[string]int `json:"hold_in_place_clients"`
	MaxPending               int            `json:"max_pending"`
	ProgressIntervalSeconds  int            `json:"progress_interval_seconds"`
	Servers                  map[string]struct {
		MaxApproval string `json:"max_approval"`
		Preview     *bool  `json:"preview"`
	} `json:"servers"`
}

type upstreamFile struct {
	Command        []string          `json:"command"`
	Env            map[string]string `json:"env"`
	PassEnv        []string          `json:"pass_env"`
	Dir            string            `json:"dir"`
	URL            string            `json:"url"`
	BearerTokenEnv string            `json:"bearer_token_env"`
}

type frontFile struct {
	Stdio *struct {
		Principal string `json:"principal"`
	} `json:"stdio"`
	HTTP *struct {
		Address    string `json:"address"`
		Principals map[string]struct {
			TokenSHA256 []string `json:"token_sha256"`
		} `json:"principals"`
		OAuth              *oauthFile `json:"oauth"`
		IdleTimeoutMinutes int        `json:"idle_timeout_minutes"`
		MaxSessions        int        `json:"max_sessions"`
		TrustedProxies     []string   `json:"trusted_proxies"`
	} `json:"http"`
}

// under says whether key names something inside parent: a field
// (parent.x) or an element (parent[0]).
func under(key, parent string) bool {
	rest, ok := strings.CutPrefix(key, parent)
	return ok && rest != "" && (rest[0] == '.' || rest[0] == '[')
}

// decodeSound decodes the keys of a configuration the schema refused that
// broken says are sound: each top-level key as far as it is sound (see
// decodeFields). A key that does not decode is added to brokenKeys.
func decodeSound(v cue.Value, broken func(string) bool, brokenKeys map[string]bool) gatewayFile {
	var f gatewayFile
	rv := reflect.ValueOf(&f).Elem()
	for i := range rv.NumField() {
		key := jsonName(rv.Type().Field(i))
		if fv := v.LookupPath(cue.MakePath(cue.Str(key))); fv.Exists() {
			decodeFields(fv, key, rv.Field(i), broken, brokenKeys)
		}
	}
	return f
}

// decodeFields decodes v, the value at key, into dst as far as it is sound:
// whole when nothing at or under key is broken; else, for a struct (or a
// pointer to one) or a map of them, each field or entry on its own, so that
// a refused fraction in approvals does not hide a misspelt server beside it,
// nor a misspelt key in an upstream that upstream's url beside its command.
// A refused map entry is kept, empty: other keys may name it, and checks of
// its own keys are suppressed by broken. What
// is refused, or of another kind, is left unset; a value that does not
// decode is added to brokenKeys.
func decodeFields(v cue.Value, key string, dst reflect.Value, broken func(string) bool, brokenKeys map[string]bool) {
	if !broken(key) {
		if v.Decode(dst.Addr().Interface()) != nil {
			brokenKeys[key] = true
		}
		return
	}
	if brokenKeys[key] {
		return // refused as a whole
	}
	switch t := dst.Type(); {
	case t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct:
		p := reflect.New(t.Elem())
		decodeFields(v, key, p.Elem(), broken, brokenKeys)
		dst.Set(p)
	case t.Kind() == reflect.Struct:
		for i := range t.NumField() {
			name := jsonName(t.Field(i))
			if fv := v.LookupPath(cue.MakePath(cue.Str(name))); fv.Exists() {
				decodeFields(fv, key+"."+name, dst.Field(i), broken, brokenKeys)
			}
		}
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
		it, err := v.Fields()
		if err != nil {
			brokenKeys[key] = true
			return
		}
		m := reflect.MakeMap(t)
		for it.Next() {
			name := it.Selector().Unquoted()
			e := reflect.New(t.Elem()).Elem()
			decodeFields(it.Value(), key+"."+name, e, broken, brokenKeys)
			m.SetMapIndex(reflect.ValueOf(name), e)
		}
		dst.Set(m)
	}
}

// jsonName is the key a configuration struct field is read from.
func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}
