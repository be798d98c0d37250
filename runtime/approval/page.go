package approval

import (
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/policyc/policyc/internal/authlimit"
	"github.com/policyc/policyc/internal/termsafe"
	"github.com/policyc/policyc/runtime/principal"
)

// The approvals page is server-rendered HTML that works without
// JavaScript. An approver signs in once, with an approver token or
// through the identity provider (signin.go); the page then keeps a
// session in a cookie (HttpOnly, SameSite=Lax) and every form carries the
// session's CSRF token, and a POST whose Origin (or Sec-Fetch-Site) says
// it came from another site is refused.

//go:embed page.html
var pageHTML string

//go:embed page.css
var pageCSS []byte

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"when":           func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	"durLabel":       durationLabel,
	"pair":           func(p *pageData, c card) cardData { return cardData{p, c} },
	"pageSize":       func() int { return DefaultPageSize },
	"incompleteNote": func() string { return IncompleteNote },
}).Parse(pageHTML))

// cardData is what the card template gets: the page and one request.
type cardData struct {
	Page *pageData
	Card card
}

const sessionCookie = "policyc_approver"

type pageSession struct {
	approver string
	csrf     string
	started  time.Time
	expires  time.Time
}

func (a *admin) pageRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/approvals", http.StatusSeeOther)
	})
	mux.HandleFunc("GET /approvals.css", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		w.Write(pageCSS)
	})
	mux.HandleFunc("GET /login", a.loginForm)
	if a.oauth != nil && a.oauth.signIn != nil {
		mux.HandleFunc("GET /signin", a.signInStart)
		mux.HandleFunc("GET "+SignInCallback, a.signInCallback)
	}
	mux.HandleFunc("POST /login", a.login)
	mux.HandleFunc("POST /logout", a.signedIn(a.logout))
	mux.HandleFunc("GET /approvals", a.signedIn(a.listPage))
	mux.HandleFunc("GET /approvals/{id}", a.signedIn(a.requestPage))
	mux.HandleFunc("POST /approvals/{id}", a.signedIn(a.decidePage))
	mux.HandleFunc("POST /approvals/{id}/revoke", a.signedIn(a.revokePage))
}

// pageData is what the template renders.
type pageData struct {
	Title    string
	Approver string
	CSRF     string
	Error    string
	Notice   string
	// Login page: the provider's sign-in (at SignInURL), the token form,
	// or both.
	Login       bool
	Next        string
	SignIn      bool
	TokenSignIn bool
	SignInURL   string
	// List page: a page of the pending requests, oldest first, and one of
	// the remembered approvals in force, newest first, each with the
	// cursor of its next page; the last decided or expired requests.
	List    bool
	Pending section
	Active  section
	Recent  []card
	Single  *card
	Now     time.Time
}

// section is one page of a list of requests.
type section struct {
	Cards []card
	// From and To number the cards shown (1-based), of Total.
	From, To, Total int
	// Next is the cursor of the next page, when there is one.
	Next string
}

// card is one request as the page shows it.
type card struct {
	Request
	Waiting   int
	Own       bool
	Durations []string
	ExpiresIn string
	Active    bool
	Anchor    string
}

func (a *admin) card(r Request, approver string) card {
	now := a.g.now()
	// What the page shows of the request is neutralised (see Neutral):
	// html/template escapes markup, not a BiDi override.
	c := card{Request: Neutral(r), Waiting: a.g.Waiting(r.ID), Own: principal.Same(approver, r.Principal), Active: r.Active(now), Anchor: r.ID}
	if r.Status == Pending {
		c.ExpiresIn = roughDuration(r.Expires.Sub(now))
		if r.Kind == KindConsent {
			c.Durations = []string{ForRemember}
		} else {
			c.Durations = a.g.AllowedDurations(r.Server)
		}
	}
	return c
}

func roughDuration(d time.Duration) string {
	if d <= 0 {
		return "now"
	}
	if d < time.Minute {
		return "in " + d.Round(time.Second).String()
	}
	return "in " + strings.TrimSuffix(d.Round(time.Second).String(), "0s")
}

func durationLabel(d string) string {
	switch d {
	case ForOnce:
		return "Approve once"
	case ForHour:
		return "Approve every call for 1 hour"
	case ForWorkday:
		return "Approve every call for 8 hours"
	case ForWeek:
		return "Approve every call for 7 days"
	case ForRemember:
		return "Consent (remembered)"
	}
	return "Approve every call for " + d
}

func (a *admin) render(w http.ResponseWriter, status int, d *pageData) {
	d.Now = a.g.now()
	// An approver from an identity provider is shown by its name; its
	// issuer and subject are in the decisions it records.
	d.Title, d.Approver, d.Error, d.Notice = termsafe.String(d.Title), termsafe.String(principal.Name(d.Approver)), termsafe.String(d.Error), termsafe.String(d.Notice)
	var b strings.Builder
	if err := pageTemplate.Execute(&b, d); err != nil {
		http.Error(w, "the approvals page failed to render", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write([]byte(b.String()))
}

// session returns the sign-in the request's cookie names, if any.
func (a *admin) session(r *http.Request) *pageSession {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.sessions[c.Value]
	if s != nil && !a.g.now().Before(s.expires) {
		delete(a.sessions, c.Value)
		return nil
	}
	return s
}

// sameOrigin refuses a POST that a browser says came from another site.
// The page's origin is the request's Host or the public URL's (pageURL,
// Config.PageURL): a proxy in front may pass on a Host of its own.
func sameOrigin(r *http.Request, pageURL string) error {
	if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" || site == "same-site" {
		return errors.New("this form was sent from another site; decide from the approvals page itself")
	}
	o := r.Header.Get("Origin")
	if o == "" || o == "null" {
		return nil
	}
	u, err := url.Parse(o)
	if err == nil && u.Host == r.Host {
		return nil
	}
	if p, perr := url.Parse(pageURL); err == nil && pageURL != "" && perr == nil &&
		strings.EqualFold(u.Scheme, p.Scheme) && strings.EqualFold(u.Host, p.Host) {
		return nil
	}
	page := r.Host
	if pageURL != "" {
		page = pageURL
	}
	return fmt.Errorf("this form was sent from %s, not from the approvals page (%s)", o, page)
}

// signedIn wraps a page handler: without a session a GET goes to the
// sign-in form (and comes back after it); a POST must come from the page
// itself and carry the session's CSRF token.
func (a *admin) signedIn(h func(http.ResponseWriter, *http.Request, *pageSession)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s := a.session(r)
		if s == nil {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			a.render(w, http.StatusUnauthorized, a.loginData("/approvals", "Your sign-in has ended; sign in again, then decide."))
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxBody)
			if err := sameOrigin(r, a.g.cfg.PageURL); err != nil {
				a.render(w, http.StatusForbidden, &pageData{Title: "Refused", Approver: s.approver, CSRF: s.csrf, Error: err.Error()})
				return
			}
			if err := r.ParseForm(); err != nil || !equalStrings(r.PostFormValue("csrf"), s.csrf) {
				a.render(w, http.StatusForbidden, &pageData{Title: "Refused", Approver: s.approver, CSRF: s.csrf, Error: "The form is stale or was not sent by the approvals page (CSRF check failed); reload the page and decide again."})
				return
			}
		}
		h(w, r, s)
	}
}

// localPath keeps a sign-in's "next" on this site: a path that starts
// with one "/", not "//" or "/\\" (which browsers take for another host),
// made of printable ASCII alone (browsers drop a tab or a newline from a
// URL, so "/\t/host" would be "//host"; the page's own links are
// percent-encoded), and no longer than maxNext (it travels in the
// sign-in cookie, which a browser drops past 4 KiB). Anything else goes
// to /approvals.
func localPath(next string) string {
	if len(next) < 1 || len(next) > maxNext || next[0] != '/' || len(next) > 1 && (next[1] == '/' || next[1] == '\\') {
		return "/approvals"
	}
	for i := 0; i < len(next); i++ {
		if next[i] <= ' ' || next[i] >= 0x7f {
			return "/approvals"
		}
	}
	return next
}

// maxNext bounds the page a sign-in returns to.
const maxNext = 1024

func (a *admin) loginForm(w http.ResponseWriter, r *http.Request) {
	a.render(w, http.StatusOK, a.loginData(localPath(r.URL.Query().Get("next")), ""))
}

func (a *admin) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	next := "/approvals"
	if err := sameOrigin(r, a.g.cfg.PageURL); err != nil {
		a.render(w, http.StatusForbidden, a.loginData(next, err.Error()))
		return
	}
	if err := r.ParseForm(); err != nil {
		a.render(w, http.StatusBadRequest, a.loginData(next, "The form could not be read."))
		return
	}
	next = localPath(r.PostFormValue("next"))
	if msg, limited := a.limited(w, r); limited {
		a.render(w, http.StatusTooManyRequests, a.loginData(next, "Not signed in: "+msg+"."))
		return
	}
	name, expires, err := a.approver(r.Context(), strings.TrimSpace(r.PostFormValue("token")))
	if err != nil {
		a.limit.Failed(authlimit.Source(r))
		a.render(w, err.(*authRefusal).status, a.loginData(next, "Not signed in: "+err.Error()))
		return
	}
	a.startSession(w, r, name, expires)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (a *admin) logout(w http.ResponseWriter, r *http.Request, s *pageSession) {
	a.mu.Lock()
	for k, x := range a.sessions {
		if x == s {
			delete(a.sessions, k)
		}
	}
	a.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: a.secure(r), MaxAge: -1})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

func (a *admin) listPage(w http.ResponseWriter, r *http.Request, s *pageSession) {
	d := &pageData{Title: "Approvals", Approver: s.approver, CSRF: s.csrf, List: true}
	q := r.URL.Query()
	var errs []string
	// Oldest pending first: it expires first.
	d.Pending, errs = a.section(a.g.List(Filter{Status: Pending}), q.Get("after"), true, s.approver, errs)
	d.Active, errs = a.section(a.g.List(Filter{Active: true}), q.Get("active_after"), false, s.approver, errs)
	now := a.g.now()
	for _, q := range a.g.List(Filter{}) {
		if len(d.Recent) == recentShown {
			break
		}
		if q.Status != Pending && !q.Active(now) {
			d.Recent = append(d.Recent, a.card(q, s.approver))
		}
	}
	status := http.StatusOK
	if len(errs) > 0 {
		status, d.Error = http.StatusBadRequest, strings.Join(errs, " ")+" The list starts again at its first page."
	}
	if a.storeLost() {
		status, d.Error = http.StatusServiceUnavailable, storeLostText+" "+d.Error
	}
	a.render(w, status, d)
}

// recentShown is how many decided or expired requests the list shows.
const recentShown = 20

// section makes a page of list for the approvals page, from cursor; a bad
// cursor is added to errs and the first page shown.
func (a *admin) section(list []Request, cursor string, oldestFirst bool, approver string, errs []string) (section, []string) {
	page, first, next, err := paginate(list, cursor, DefaultPageSize, oldestFirst)
	if err != nil {
		errs = append(errs, "The link's cursor is not one this page made.")
		page, first, next, _ = paginate(list, "", DefaultPageSize, oldestFirst)
	}
	sec := section{From: first + 1, To: first + len(page), Total: len(list), Next: next}
	for _, q := range page {
		sec.Cards = append(sec.Cards, a.card(q, approver))
	}
	return sec, errs
}

func (a *admin) requestPage(w http.ResponseWriter, r *http.Request, s *pageSession) {
	if a.storeLost() {
		a.showRequest(w, http.StatusServiceUnavailable, r.PathValue("id"), s, storeLostText, "")
		return
	}
	a.showRequest(w, http.StatusOK, r.PathValue("id"), s, "", "")
}

// storeLostText is what the page says while this replica has lost its
// state database: as the admin API's 503, but the page shows what it has.
const storeLostText = "The state database is unavailable on this replica: this page may miss requests made or decided on other replicas since, and a decision here cannot be saved. Use another replica, or wait."

func (a *admin) showRequest(w http.ResponseWriter, status int, id string, s *pageSession, errText, notice string) {
	q, ok := a.g.Get(id)
	if !ok {
		st, msg := http.StatusNotFound, fmt.Sprintf("There is no approval request %q. It may have been removed after its retention period; the audit log still has it.", id)
		if a.storeLost() {
			// Made on another replica, perhaps, since this one lost track.
			st, msg = http.StatusServiceUnavailable, storeLostText
		}
		a.render(w, st, &pageData{Title: "No such request", Approver: s.approver, CSRF: s.csrf, Error: msg})
		return
	}
	c := a.card(q, s.approver)
	a.render(w, status, &pageData{Title: "Request " + id, Approver: s.approver, CSRF: s.csrf, Single: &c, Error: errText, Notice: notice})
}

func (a *admin) decidePage(w http.ResponseWriter, r *http.Request, s *pageSession) {
	id := r.PathValue("id")
	choice := r.PostFormValue("decision")
	if choice == "" {
		// Only a button says what to decide: a form sent without one
		// decides nothing, least of all an approval.
		a.showRequest(w, http.StatusBadRequest, id, s, "The form did not say what to decide: nothing was decided. Choose Deny or one of the Approve buttons.", "")
		return
	}
	verdict, forWhat := VerdictApprove, choice
	if choice == VerdictDeny {
		verdict, forWhat = VerdictDeny, ""
	}
	_, err := a.g.Decide(id, verdict, forWhat, strings.TrimSpace(r.PostFormValue("reason")), Approver{Name: s.approver, From: remote("page", r)})
	if err != nil {
		a.showRequest(w, statusOf(err), id, s, err.Error(), "")
		return
	}
	// Post/redirect/get: reloading the result does not decide again.
	http.Redirect(w, r, "/approvals/"+url.PathEscape(id), http.StatusSeeOther)
}

func (a *admin) revokePage(w http.ResponseWriter, r *http.Request, s *pageSession) {
	id := r.PathValue("id")
	if _, err := a.g.Revoke(id, Approver{Name: s.approver, From: remote("page", r)}); err != nil {
		a.showRequest(w, statusOf(err), id, s, err.Error(), "")
		return
	}
	http.Redirect(w, r, "/approvals/"+url.PathEscape(id), http.StatusSeeOther)
}
