package lint

import (
	"bytes"
	"io"
	"net/url"
	"path/filepath"
	"strings"
	"unicode/utf16"

	"github.com/policyc/policyc/compiler"
)

// SARIF 2.1.0 (OASIS), the subset policyc writes. Field names follow the
// standard's JSON schema, which a test validates the output against.

type sarifLog struct {
	Schema  string     `json:"$schema"`
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool    sarifTool     `json:"tool"`
	Results []sarifResult `json:"results"`
}

type sarifTool struct {
	Driver sarifDriver `json:"driver"`
}

type sarifDriver struct {
	Name           string      `json:"name"`
	Version        string      `json:"version"`
	InformationURI string      `json:"informationUri"`
	Rules          []sarifRule `json:"rules"`
}

type sarifText struct {
	Text     string `json:"text"`
	Markdown string `json:"markdown,omitempty"`
}

type sarifRule struct {
	ID                   string            `json:"id"`
	Name                 string            `json:"name"`
	ShortDescription     sarifText         `json:"shortDescription"`
	HelpURI              string            `json:"helpUri"`
	Help                 sarifText         `json:"help"`
	DefaultConfiguration sarifRuleConfig   `json:"defaultConfiguration"`
	Properties           map[string]string `json:"properties"`
}

type sarifRuleConfig struct {
	Enabled bool   `json:"enabled"`
	Level   string `json:"level"`
}

type sarifResult struct {
	RuleID    string          `json:"ruleId"`
	RuleIndex int             `json:"ruleIndex"`
	Level     string          `json:"level"`
	Message   sarifText       `json:"message"`
	Locations []sarifLocation `json:"locations"`
}

type sarifLocation struct {
	PhysicalLocation sarifPhysical `json:"physicalLocation"`
}

type sarifPhysical struct {
	ArtifactLocation sarifArtifact `json:"artifactLocation"`
	Region           *sarifRegion  `json:"region,omitempty"`
}

type sarifArtifact struct {
	URI       string `json:"uri"`
	URIBaseID string `json:"uriBaseId,omitempty"`
}

type sarifRegion struct {
	StartLine   int `json:"startLine"`
	StartColumn int `json:"startColumn,omitempty"`
}

// SARIFSchema is the schema address SARIF logs declare.
const SARIFSchema = "https://json.schemastore.org/sarif-2.1.0.json"

func sarifLevel(l Level) string {
	switch l {
	case Off:
		return "none"
	case LevelOf(compiler.Error):
		return "error"
	case LevelOf(compiler.Warning):
		return "warning"
	}
	return "note"
}

// WriteSARIF prints the report as a SARIF 2.1.0 log with one run: every
// rule of the catalogue with its metadata and helpUri, and one result per
// finding. File locations are relative to the directory policyc ran in
// (uriBaseId %SRCROOT%), or file:// URIs when the policy root is absolute.
func WriteSARIF(w io.Writer, rep *Report, o Output) error {
	driver := sarifDriver{Name: "policyc", Version: compiler.Version,
		InformationURI: "https://github.com/policyc/policyc", Rules: []sarifRule{}}
	index := map[string]int{}
	for _, c := range compiler.Codes {
		index[c.ID] = len(driver.Rules)
		level := sarifLevel(LevelOf(c.Level))
		driver.Rules = append(driver.Rules, sarifRule{
			ID: c.ID, Name: ruleName(c.ID),
			ShortDescription: sarifText{Text: c.Summary},
			HelpURI:          Help(c.ID),
			Help: sarifText{Text: c.Summary + ". See " + Help(c.ID),
				Markdown: c.Summary + ". See [" + c.ID + "](" + Help(c.ID) + ")."},
			DefaultConfiguration: sarifRuleConfig{Enabled: true, Level: level},
			Properties:           map[string]string{"category": string(c.Category)},
		})
	}
	run := sarifRun{Tool: sarifTool{Driver: driver}, Results: []sarifResult{}}
	for _, f := range rep.Findings {
		column := utf16Column(o.Sources[f.Pos.File], f.Pos.Line, f.Pos.Column)
		f = o.rooted(f)
		msg := f.Message
		if f.Suggestion != "" {
			msg += "\n" + f.Suggestion
		}
		res := sarifResult{RuleID: f.Code, RuleIndex: index[f.Code], Level: sarifLevel(LevelOf(f.Severity)),
			Message: sarifText{Text: msg}}
		loc := sarifLocation{PhysicalLocation: sarifPhysical{ArtifactLocation: artifact(f.Pos.File)}}
		if f.Pos.Line > 0 {
			loc.PhysicalLocation.Region = &sarifRegion{StartLine: f.Pos.Line, StartColumn: column}
		}
		res.Locations = []sarifLocation{loc}
		run.Results = append(run.Results, res)
	}
	return encodeJSON(w, sarifLog{Schema: SARIFSchema, Version: "2.1.0", Runs: []sarifRun{run}})
}

// utf16Column converts column, a 1-based byte column of line (1-based) in
// src, to the 1-based column in UTF-16 code units that SARIF counts in by
// default (SARIF 2.1.0, 3.14.17, columnKind), as GitHub code scanning
// reads it: past a line of "é😀" the byte column is 7, the UTF-16 one 4.
// Without the source, or past its end, the byte column is kept.
func utf16Column(src []byte, line, column int) int {
	if src == nil || line < 1 || column < 1 {
		return column
	}
	for ; line > 1; line-- {
		i := bytes.IndexByte(src, '\n')
		if i < 0 {
			return column
		}
		src = src[i+1:]
	}
	if i := bytes.IndexByte(src, '\n'); i >= 0 {
		src = src[:i]
	}
	if column-1 > len(src) {
		return column
	}
	units := 1
	for _, r := range string(src[:column-1]) {
		units += utf16.RuneLen(r)
	}
	return units
}

// artifact turns a printed file name into a SARIF artifact location.
func artifact(name string) sarifArtifact {
	if filepath.IsAbs(name) {
		u := url.URL{Scheme: "file", Path: filepath.ToSlash(name)}
		return sarifArtifact{URI: u.String()}
	}
	u := url.URL{Path: strings.TrimPrefix(filepath.ToSlash(name), "./")}
	return sarifArtifact{URI: u.String(), URIBaseID: "%SRCROOT%"}
}

// ruleName is a rule id in the CamelCase SARIF viewers show as its name.
func ruleName(id string) string {
	var b strings.Builder
	for _, part := range strings.Split(id, "-") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}
