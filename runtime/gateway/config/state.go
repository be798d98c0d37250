package config

import (
	"fmt"
	"os"
)

// State is where the gateway's replicas share their state: a PostgreSQL
// database (state.postgres). Without it, the state is kept in state_dir
// alone and one gateway uses it.
type State struct {
	// DSN is the database's connection string, read from the variable
	// DSNEnv names.
	DSN, DSNEnv string
	// Replica names this gateway in 'policyc gateway status'; empty means
	// the host name and process id.
	Replica string
}

// stateFile is state as written.
type stateFile struct {
	Postgres *struct {
		DSNEnv  string `json:"dsn_env"`
		Replica string `json:"replica"`
	} `json:"postgres"`
}

// state reads state.postgres: the connection string must be in the
// gateway's environment when it starts.
func (r *reader) state() {
	s := r.file.State
	if s == nil || s.Postgres == nil {
		return
	}
	p := s.Postgres
	r.c.State = &State{DSNEnv: p.DSNEnv, Replica: p.Replica}
	if r.o.Use != ForGateway {
		return // a pull keeps no state
	}
	where, when := r.o.Use.environment()
	switch dsn, set := os.LookupEnv(p.DSNEnv); {
	case !set || dsn == "":
		r.bad("state.postgres.dsn_env", fmt.Sprintf("%s holds the state database's connection string and is not set in %s", varName(p.DSNEnv), where),
			when+`, e.g. `+p.DSNEnv+`="postgres://gateway@db.internal:5432/policyc" (a password is better kept in ~/.pgpass or PGPASSWORD than in the string)`)
	default:
		r.c.State.DSN = dsn
	}
}
