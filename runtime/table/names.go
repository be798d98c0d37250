package table

// ValidName reports whether s can name a server, channel or group: the
// policy schema's #Name, ^[A-Za-z0-9][A-Za-z0-9._-]*$.
func ValidName(s string) bool { return validName(s, "._-") }

// ValidPrincipal reports whether s can name a principal: the policy
// schema's #PrincipalName, ^[A-Za-z0-9][A-Za-z0-9._@+:/-]*$, so that an
// e-mail address or a workload's URI-like name works.
func ValidPrincipal(s string) bool { return validName(s, "._@+:/-") }

// validName reports whether s is a letter or digit followed by letters,
// digits and bytes of extra.
func validName(s, extra string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			continue
		}
		if i == 0 || !containsByte(extra, c) {
			return false
		}
	}
	return s != ""
}

func containsByte(s string, c byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return true
		}
	}
	return false
}
