package agents

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/internal/agentapi"
	"github.com/monoco/courier/internal/fault"
	"github.com/monoco/courier/schema"
)

// resolveArtifacts copies artifacts given by local path into the dropzone
// and checks those given by id. A path must pass the attach policy
// (attach.go); the file copied is the one checked, still open. Every copy
// goes into one batch, committed only when every artifact is resolved:
// a refusal leaves nothing in the dropzone. fromFlag maps the index of an
// artifact that came from --attach to what the flag said, so that its
// error names the flag (a draft's name their field and line).
func (l *Local) resolveArtifacts(d *schema.Draft, src *schema.Source, baseDir string, dryRun bool, fromFlag map[int]string) error {
	if len(d.Artifacts) == 0 {
		return nil
	}
	dz, err := l.Workspace.Dropzone()
	if err != nil {
		return err
	}
	policy, err := newAttachPolicy(l.Root, l.Config)
	if err != nil {
		return err
	}
	if baseDir, err = filepath.Abs(baseDir); err != nil {
		return err
	}
	return inBatch(dz, dryRun, func(batch *dropzone.Batch) error {
		for i := range d.Artifacts {
			art := &d.Artifacts[i]
			p := fmt.Sprintf("artifacts[%d]", i)
			refuse := func(format string, args ...any) error {
				if x, ok := fromFlag[i]; ok {
					return fault.Errorf(fault.Invalid, "--attach %s: %s", x, fmt.Sprintf(format, args...))
				}
				return src.Errorf(p+".path", format, args...)
			}
			if art.Path != "" {
				if err := l.copyArtifact(art, policy, baseDir, batch, dryRun, refuse); err != nil {
					return err
				}
			} else if err := statArtifact(dz, art, src, p); err != nil {
				return err
			}
			if art.Type == "" {
				art.Type = schema.ArtifactTypeOf(art.MimeType, art.Name)
			}
		}
		return nil
	})
}

// inBatch runs fill with a batch of dz, and commits it when fill succeeds
// and this is no dry run; otherwise it aborts it: a refusal leaves nothing
// in the dropzone.
func inBatch(dz *dropzone.Store, dryRun bool, fill func(*dropzone.Batch) error) error {
	batch := dz.NewBatch()
	if err := fill(batch); err != nil || dryRun {
		batch.Abort()
		return err
	}
	return batch.Commit()
}

// statArtifact checks that an artifact given by id is in the dropzone,
// and gives it its size and, when it has none, a name.
func statArtifact(dz *dropzone.Store, art *schema.DraftArtifact, src *schema.Source, field string) error {
	obj, err := dz.Keep(art.ID) // marked in use: a prune running now spares it
	if err != nil {
		return src.Errorf(field+".id", "%s is not in the dropzone", art.ID)
	}
	art.Size = obj.Size
	if art.Name == "" {
		art.Name = strings.TrimPrefix(art.ID, "sha256:")[:12]
	}
	return nil
}

// copyArtifact opens the file an artifact's path names, if the policy
// allows it, and streams it into the batch (or only measures it, for a
// dry run).
func (l *Local) copyArtifact(art *schema.DraftArtifact, policy *attachPolicy, baseDir string, batch *dropzone.Batch, dryRun bool, refuse func(string, ...any) error) error {
	f, err := policy.open(art.Path, baseDir)
	if err != nil {
		return refuse("%v", err)
	}
	defer f.Close()
	if art.Name == "" {
		art.Name = dropzone.SanitizeName(filepath.Base(f.abs))
	}
	size := f.info.Size()
	if max := l.Config.Courier.Limits.MaxArtifactBytes; max > 0 && size > max {
		return refuse("%s is %d bytes, over the artifact limit of %d (courier.limits.max_artifact_bytes)", art.Path, size, max)
	}
	if art.MimeType == "" {
		art.MimeType = sniffType(f.File, art.Name)
	}
	if dryRun {
		art.Size = size
		return nil
	}
	return putArtifact(batch, f, art, refuse)
}

// putArtifact stores r in the batch as the artifact's content: the
// object's id and size take the place of its path. Content over the
// dropzone's limit is refused by refuse.
func putArtifact(batch *dropzone.Batch, r io.Reader, art *schema.DraftArtifact, refuse func(string, ...any) error) error {
	obj, err := batch.Put(r)
	if err != nil {
		if errors.Is(err, dropzone.ErrTooLarge) {
			return refuse("%s: %v", art.Path, err)
		}
		return err
	}
	art.ID, art.Size, art.Path = obj.ID, obj.Size, ""
	return nil
}

// sniffType names the type of an attachment by its name, else by its
// first bytes, read at their offset so that the copy still starts at 0.
func sniffType(f *os.File, name string) string {
	if t := mime.TypeByExtension(filepath.Ext(name)); t != "" {
		return t
	}
	buf := make([]byte, 512)
	n, _ := f.ReadAt(buf, 0)
	return http.DetectContentType(buf[:n])
}

// storeArtifacts is resolveArtifacts on the service's side: an artifact
// given by path is stored from the content the agent's command line sent
// (and checked against its own attach policy first), never read from the
// path; one given by id must be in the dropzone. One batch: a refusal
// leaves nothing in the dropzone.
func (b *Backend) storeArtifacts(d *schema.Draft, src *schema.Source, req *agentapi.SendRequest, files agentapi.Files) error {
	meta := map[int]agentapi.File{}
	for _, f := range req.Files {
		meta[f.Index] = f
	}
	for i, art := range d.Artifacts {
		if _, ok := meta[i]; ok != (art.Path != "") {
			return fault.Errorf(fault.Usage, "agentapi: the request's files do not match the draft's artifacts given by path (artifacts[%d])", i)
		}
	}
	return inBatch(b.Dropzone, req.DryRun, func(batch *dropzone.Batch) error {
		for i := range d.Artifacts {
			art := &d.Artifacts[i]
			p := fmt.Sprintf("artifacts[%d]", i)
			if art.Path == "" {
				if err := statArtifact(b.Dropzone, art, src, p); err != nil {
					return err
				}
			} else if err := b.storeArtifact(art, meta[i], src, p, batch, req.DryRun, files); err != nil {
				return err
			}
			if art.Type == "" {
				art.Type = schema.ArtifactTypeOf(art.MimeType, art.Name)
			}
		}
		return nil
	})
}

// storeArtifact stores the content sent for an artifact given by path (or
// only measures it, for a dry run), naming and typing it from what the
// command line said of the file when the draft does not.
func (b *Backend) storeArtifact(art *schema.DraftArtifact, f agentapi.File, src *schema.Source, field string, batch *dropzone.Batch, dryRun bool, files agentapi.Files) error {
	if art.Name == "" {
		art.Name = dropzone.SanitizeName(f.Name)
	}
	if art.Name == "" {
		art.Name = dropzone.SanitizeName(filepath.Base(art.Path))
	}
	r, err := files.Open(f.Index)
	if err != nil {
		return err
	}
	br := bufio.NewReaderSize(r, 512)
	if art.MimeType == "" {
		art.MimeType = f.MimeType
	}
	if art.MimeType == "" {
		art.MimeType = sniffReader(br, art.Name)
	}
	max := b.Config.Courier.Limits.MaxArtifactBytes
	if dryRun {
		n, err := io.Copy(io.Discard, br)
		if err != nil {
			return err
		}
		if max > 0 && n > max {
			return src.Errorf(field+".path", "%s is over the artifact limit of %d bytes (courier.limits.max_artifact_bytes)", art.Path, max)
		}
		art.Size = n
		return nil
	}
	return putArtifact(batch, br, art, func(format string, args ...any) error {
		return src.Errorf(field+".path", format, args...)
	})
}

// sniffReader names the type of content by its name, else by its first
// bytes (peeked: the reader still starts at them).
func sniffReader(br *bufio.Reader, name string) string {
	if t := mime.TypeByExtension(filepath.Ext(name)); t != "" {
		return t
	}
	head, _ := br.Peek(512)
	return http.DetectContentType(head)
}
