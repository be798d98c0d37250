package gitsrc

import (
	"bytes"
	"compress/zlib"
	"errors"
	"io"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// packWalker reads commit headers straight from pack files: the serial
// reads one header per commit of history, and go-git would inflate and
// cache each whole commit to answer. Whatever it cannot read this way (a
// loose object, a deltified commit, an unusual header) it leaves to
// go-git, so it is a shortcut, never a second source of truth.
type packWalker struct {
	packs []packFile
	buf   []byte
	out   []byte
	z     io.ReadCloser
}

type packFile struct {
	idx  *idxfile.MemoryIndex
	data billy.File
}

// openPackWalker opens the pack files of a filesystem storage; nil when
// there is none or they cannot be read, and the caller falls back.
func openPackWalker(st *filesystem.Storage) *packWalker {
	hashes, err := st.ObjectPacks()
	if err != nil || len(hashes) == 0 {
		return nil
	}
	fs := st.Filesystem()
	w := &packWalker{buf: make([]byte, 1024), out: make([]byte, 2*(len("parent ")+2*maxHashSize+1))}
	for _, h := range hashes {
		base := fs.Join("objects", "pack", "pack-"+h.String())
		f, err := fs.Open(base + ".idx")
		if err != nil {
			w.Close()
			return nil
		}
		idx := idxfile.NewMemoryIndex()
		err = idxfile.NewDecoder(f).Decode(idx)
		f.Close()
		if err != nil {
			w.Close()
			return nil
		}
		data, err := fs.Open(base + ".pack")
		if err != nil {
			w.Close()
			return nil
		}
		w.packs = append(w.packs, packFile{idx: idx, data: data})
	}
	return w
}

func (w *packWalker) Close() error {
	for _, p := range w.packs {
		p.data.Close()
	}
	w.packs = nil
	return nil
}

// errNotHere means the walker cannot read the object; go-git can.
var errNotHere = errors.New("not readable from a pack directly")

// header returns the start of commit h's content: enough for its tree and
// first parent lines.
func (w *packWalker) header(h plumbing.Hash) ([]byte, error) {
	for _, p := range w.packs {
		off, err := p.idx.FindOffset(h)
		if err != nil {
			continue
		}
		n, err := p.data.ReadAt(w.buf, off)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		b := w.buf[:n]
		// Object header: type in bits 4-6 of the first byte, then a
		// little-endian base-128 size.
		i := 0
		for ; i < len(b) && b[i]&0x80 != 0; i++ {
		}
		if i >= len(b) || (b[0]>>4)&7 != byte(plumbing.CommitObject) {
			return nil, errNotHere
		}
		src := bytes.NewReader(b[i+1:])
		if w.z == nil {
			if w.z, err = zlib.NewReader(src); err != nil {
				return nil, errNotHere
			}
		} else if err := w.z.(zlib.Resetter).Reset(src, nil); err != nil {
			return nil, errNotHere
		}
		m, err := io.ReadFull(w.z, w.out)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			return nil, errNotHere
		}
		return w.out[:m], nil
	}
	return nil, errNotHere
}
