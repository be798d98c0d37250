package catalog

import (
	"errors"
	"fmt"
	"iter"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/policyc/policyc/internal/fileio"
	"github.com/policyc/policyc/runtime/table"
)

// File is one snapshot file as read from a work tree, a git revision or the
// index: Name is its path relative to the catalogue directory
// ("github.json"), Data its bytes.
type File struct {
	Name string
	Data []byte
}

// Catalog is the snapshots of a policy repository, by server name.
type Catalog struct {
	Servers map[string]*Snapshot
	// NotCanonical lists the servers whose file is not in canonical form
	// (edited by hand, or written by another tool); it still reads.
	NotCanonical []string
}

// Item is one catalogued tool, prompt or resource, in the terms a policy
// decides on: (server, kind, name), where the name of a resource is its URI.
type Item struct {
	Server string
	// Kind is table.Tool.String(), table.Prompt.String() or table.Resource.String().
	Kind string
	Name string
	// Tool is the catalogued tool (annotations, input schema) for a tool;
	// nil for prompts and resources.
	Tool *Tool
	// def is the catalogued entry, whose digest DefinitionDigest is.
	def interface{ DefinitionDigest() string }
}

// DefinitionDigest is the item's definition digest (see
// Tool.DefinitionDigest); "" for an Item not yielded by Items.
func (it Item) DefinitionDigest() string {
	if it.def == nil {
		return ""
	}
	return it.def.DefinitionDigest()
}

// ReadDir reads every snapshot of a catalogue directory (policy root
// + "/catalog"). A directory that does not exist is an empty catalogue, not
// an error: a policy need not have one.
func ReadDir(dir string) (*Catalog, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return &Catalog{Servers: map[string]*Snapshot{}}, nil
	}
	if err != nil {
		return nil, err
	}
	var files []File
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := fileio.ReadRegular(filepath.Join(dir, e.Name()))
		if errors.Is(err, fileio.ErrDirectory) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w; the catalogue directory holds one snapshot file per server: make it a regular file, or remove it", err)
		}
		// Named by their path, so that errors point at the file.
		files = append(files, File{Name: filepath.Join(dir, e.Name()), Data: b})
	}
	return Parse(files)
}

// Parse reads snapshot files. Each must be named after its server
// ("<server>.json"); every problem of every file is reported, each naming
// its file.
func Parse(files []File) (*Catalog, error) {
	c := &Catalog{Servers: map[string]*Snapshot{}}
	var errs []error
	for _, f := range files {
		base := path.Base(filepath.ToSlash(f.Name))
		if !strings.HasSuffix(base, ".json") {
			continue
		}
		s, canonical, err := Decode(f.Data)
		var pe *PosError
		switch {
		case errors.As(err, &pe):
			errs = append(errs, fmt.Errorf("%s:%w", f.Name, err)) // file:line:col: ...
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", f.Name, err))
			continue
		}
		if want := strings.TrimSuffix(base, ".json"); s.Server != want {
			errs = append(errs, fmt.Errorf("%s: holds the snapshot of server %q; a snapshot file is named after its server (%s.json)", f.Name, s.Server, s.Server))
			continue
		}
		c.Servers[s.Server] = s
		if !canonical {
			c.NotCanonical = append(c.NotCanonical, s.Server)
		}
	}
	sort.Strings(c.NotCanonical)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// ServerNames returns the catalogued servers, sorted.
func (c *Catalog) ServerNames() []string { return slices.Sorted(maps.Keys(c.Servers)) }

// Items yields every catalogued tool, prompt and resource: servers in name
// order, then tools, prompts and resources in snapshot order (sorted by
// name, for snapshots read with ReadDir or Parse).
func (c *Catalog) Items() iter.Seq[Item] {
	return func(yield func(Item) bool) {
		for _, name := range c.ServerNames() {
			for it := range c.Servers[name].Items() {
				if !yield(it) {
					return
				}
			}
		}
	}
}

// Items yields the snapshot's tools, prompts and resources as Items.
func (s *Snapshot) Items() iter.Seq[Item] {
	return func(yield func(Item) bool) {
		for i := range s.Tools {
			if !yield(Item{Server: s.Server, Kind: table.Tool.String(), Name: s.Tools[i].Name, Tool: &s.Tools[i], def: &s.Tools[i]}) {
				return
			}
		}
		for i := range s.Prompts {
			if !yield(Item{Server: s.Server, Kind: table.Prompt.String(), Name: s.Prompts[i].Name, def: &s.Prompts[i]}) {
				return
			}
		}
		for i := range s.Resources {
			if !yield(Item{Server: s.Server, Kind: table.Resource.String(), Name: s.Resources[i].URI, def: &s.Resources[i]}) {
				return
			}
		}
	}
}

// ItemNames returns the names of one kind (table.Tool.String(), KindPrompt or
// KindResource) of a server's catalogued items, sorted: tool and prompt
// names, or resource URIs. Nil when the server has no snapshot.
func (c *Catalog) ItemNames(server, kind string) []string {
	s := c.Servers[server]
	if s == nil {
		return nil
	}
	var out []string
	for it := range s.Items() {
		if it.Kind == kind {
			out = append(out, it.Name)
		}
	}
	sort.Strings(out)
	return out
}

// Names is ItemNames with a table.Kind: a *Catalog is the Items of
// internal/decisiondiff, so that policyc diff compares every catalogued item.
func (c *Catalog) Names(server string, kind table.Kind) []string {
	return c.ItemNames(server, kind.String())
}

// Tool returns a catalogued tool, or nil.
func (c *Catalog) Tool(server, name string) *Tool {
	s := c.Servers[server]
	if s == nil {
		return nil
	}
	for i := range s.Tools {
		if s.Tools[i].Name == name {
			return &s.Tools[i]
		}
	}
	return nil
}
