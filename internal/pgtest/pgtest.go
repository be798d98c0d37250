// Package pgtest gives a test a database of its own on the PostgreSQL
// server the project's tests use: 127.0.0.1:5432, user postgres, trust
// authentication (.ci/run makes sure it runs).
//
// POLICYC_POSTGRES says how much the tests need it: unset, a test skips
// when the server cannot be reached; "required" (as .ci/run sets it), or a
// connection string to the server's maintenance database, the test fails
// instead.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Admin is the maintenance database tests create theirs from.
const Admin = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// admin returns the maintenance database's DSN and whether the server is
// required.
func admin() (string, bool) {
	switch v := os.Getenv("POLICYC_POSTGRES"); v {
	case "":
		return Admin, false
	case "required":
		return Admin, true
	default:
		return v, true
	}
}

// DB creates a database with a random name, dropped when the test ends,
// and returns its connection string.
func DB(tb testing.TB) string {
	tb.Helper()
	dsn, required := admin()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		if !required {
			tb.Skipf("no PostgreSQL server at %s (%v); set POLICYC_POSTGRES=required to make this a failure", dsn, err)
		}
		tb.Fatalf("POLICYC_POSTGRES=%s, but the PostgreSQL server cannot be reached: %v", os.Getenv("POLICYC_POSTGRES"), err)
	}
	defer conn.Close(context.Background())
	var b [8]byte
	rand.Read(b[:])
	name := "policyc_test_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		tb.Fatalf("create database %s: %v", name, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			tb.Errorf("drop database %s: %v", name, err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			tb.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		tb.Fatalf("POLICYC_POSTGRES: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// Exec runs sql on the database at dsn.
func Exec(tb testing.TB, dsn, sql string, args ...any) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		tb.Fatalf("%s: %v", sql, err)
	}
}
