package threading

// Tests on real threads from the shared corpus (see its README.md and
// threads/SOURCES.tsv). They run only when COURIER_CORPUS names the corpus:
//
//	COURIER_CORPUS=$PWD/../shared/corpus go test -v -run Corpus ./threading

import (
	"bufio"
	"io/fs"
	"mime"
	"net/mail"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/schema"
)

// corpusMail is one message file of the corpus.
type corpusMail struct {
	path    string // relative to its corpus folder
	h       Headers
	subject string // decoded, white space collapsed
	refs    []string
	irt     []string
	own     string // NormalizeID of the Message-ID
}

var wordDecoder mime.WordDecoder

func readCorpusMail(t *testing.T, root, path string) corpusMail {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	msg, err := mail.ReadMessage(bufio.NewReader(f))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	rel, _ := filepath.Rel(root, path)
	m := corpusMail{
		path: rel,
		h: Headers{
			MessageID:  msg.Header.Get("Message-Id"),
			InReplyTo:  msg.Header.Get("In-Reply-To"),
			References: msg.Header.Get("References"),
		},
	}
	subj := msg.Header.Get("Subject")
	if dec, err := wordDecoder.DecodeHeader(subj); err == nil {
		subj = dec
	}
	m.subject = strings.Join(strings.Fields(subj), " ")
	m.refs = ParseIDs(m.h.References)
	m.irt = ParseIDs(m.h.InReplyTo)
	m.own = NormalizeID(m.h.MessageID)
	return m
}

// readCorpusDir reads every regular file under dir, sorted by path.
func readCorpusDir(t *testing.T, dir string, keep func(name string) bool) []corpusMail {
	t.Helper()
	var out []corpusMail
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && keep(d.Name()) {
			out = append(out, readCorpusMail(t, dir, path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkMail asserts what holds for every message, whatever its thread:
// parent, ids, and the reply headers built with the message as parent.
func checkMail(t *testing.T, m corpusMail) Thread {
	t.Helper()
	th := EmailThread(m.h, "")
	if m.own == "" {
		t.Fatalf("%s: no Message-ID", m.path)
	}
	if th.Synthetic || !strings.HasPrefix(th.Key, KeyPrefix) || th.Key != KeyPrefix+th.Root {
		t.Errorf("%s: thread %+v", m.path, th)
	}
	if want := len(m.refs) == 0 && len(m.irt) == 0; th.IsRoot != want {
		t.Errorf("%s: IsRoot %v, want %v", m.path, th.IsRoot, want)
	}

	// reply_to: the first In-Reply-To id, else the last References id.
	var wantParent string
	switch {
	case len(m.irt) > 0:
		wantParent = m.irt[0]
	case len(m.refs) > 0:
		wantParent = m.refs[len(m.refs)-1]
	}
	if th.Parent != wantParent {
		t.Errorf("%s: Parent %q, want %q", m.path, th.Parent, wantParent)
	}
	// In-Reply-To without References: seed 003 roots the message at its
	// parent, whatever depth the parent is at.
	if len(m.refs) == 0 && len(m.irt) > 0 && (th.Root != m.irt[0] || th.Key != KeyPrefix+th.Parent) {
		t.Errorf("%s: In-Reply-To only, thread %+v, want rooted at the parent %q", m.path, th, m.irt[0])
	}
	if wantParent != "" && th.ReplyToID() != EmailID("<"+wantParent+">") {
		t.Errorf("%s: ReplyToID %q, want EmailID of %q", m.path, th.ReplyToID(), wantParent)
	}
	if (th.RootID() == "") != th.IsRoot {
		t.Errorf("%s: RootID %q with IsRoot %v", m.path, th.RootID(), th.IsRoot)
	}
	for _, id := range []string{th.ReplyToID(), th.RootID(), EmailID(m.h.MessageID)} {
		if id != "" && !schema.ValidID(id) {
			t.Errorf("%s: invalid id %q", m.path, id)
		}
	}

	// Replying to this message: References start at its thread's root and
	// end at its Message-ID, written as received; the reply joins its thread.
	irt, refs := ReplyHeaders(m.h.MessageID, m.h.References, m.h.InReplyTo)
	wrote := "<" + strings.Trim(strings.TrimSpace(m.h.MessageID), "<>") + ">"
	if irt != wrote {
		t.Errorf("%s: reply In-Reply-To %q, want %q", m.path, irt, wrote)
	}
	if len(refs) == 0 || NormalizeID(refs[0]) != th.Root {
		t.Errorf("%s: reply References %q do not start at the root %q", m.path, refs, th.Root)
	} else if refs[len(refs)-1] != wrote {
		t.Errorf("%s: reply References %q do not end with %q", m.path, refs, wrote)
	}
	if len(ParseIDs(strings.Join(refs, " "))) != len(refs) {
		t.Errorf("%s: reply References %q hold duplicates", m.path, refs)
	}
	reply := EmailThread(Headers{MessageID: "<reply@courier.test>", InReplyTo: irt, References: strings.Join(refs, " ")}, "")
	if reply.Key != th.Key || reply.Parent != m.own {
		t.Errorf("%s: reply lands in %q under %q, want %q under %q", m.path, reply.Key, reply.Parent, th.Key, m.own)
	}
	return th
}

// derivedRow is a row of ceph-devel/DERIVED-thread-structure.tsv.
type derivedRow struct {
	messageID, parentID string
	nRefs               int
	hasIRT              bool
}

func readDerived(t *testing.T, path string) map[string]derivedRow {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]derivedRow{}
	for i, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if strings.HasPrefix(line, "#") || strings.HasPrefix(line, "thread_dir\t") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) < 8 {
			t.Fatalf("%s:%d: %d fields", path, i+1, len(f))
		}
		n, err := strconv.Atoi(f[6])
		if err != nil {
			t.Fatalf("%s:%d: n_references %q", path, i+1, f[6])
		}
		rows[f[0]+"/"+f[1]] = derivedRow{messageID: f[2], parentID: f[3], nRefs: n, hasIRT: f[7] == "True"}
	}
	return rows
}

// cephRoots gives, for each ceph-devel thread folder, the root of each file
// in order: "NN" names the Message-ID of file NN of the folder, anything else
// is a root id that is not in the folder. Read off the headers by hand.
var cephRoots = map[string][]string{
	"big5-multiclient-read-eof":           rep("01", 6),
	"big5-skip-copying-eof-v2":            rep("01", 7),
	"deep-umount-stucks":                  rep("01", 18),
	"gb2312-readdir-prepopulate-deadlock": rep("01", 6), // References separated by commas
	"gbk-rbd-compression-hint":            rep("01", 10),
	"iso2022jp-skip-copying-eof-v3":       rep("01", 7),
	"single-iso2022jp-subject-spam":       {"01"},
	// The "irt-only" folders are where References break. Seed 003 looks at
	// one message at a time, so a broken chain starts a new key; joining
	// the pieces takes the mailbox index and is the ingest layer's job.
	//
	// 05 (PATCH v2) has an empty References header and In-Reply-To 04, so
	// its root is 04 itself, its direct parent, not the top (01); 06 replies
	// to 05 with References starting at 04. Two keys: 01-04 and 05-06.
	"irt-only-rbd-double-free": {"01", "01", "01", "01", "04", "04"},
	// The root <"H...163fdf..."@MHS> (an Outlook/Scalix id with a quoted
	// local part) is not in the folder. 04 has In-Reply-To 03 and no
	// References, so its root is 03, its parent (depth 3 in the thread); 05
	// replies to 04 with References starting at 03. Two keys again.
	"irt-only-snap-mkdir-timestamp": {snapRoot, snapRoot, snapRoot, "03", "03", snapRoot},
}

const snapRoot = `"H000007100163fdf.1583792359.sx.f1-outsourcing.eu*"@MHS`

func rep(s string, n int) []string { return slices.Repeat([]string{s}, n) }

func TestCorpusCephDevel(t *testing.T) {
	base := filepath.Join(testutil.CorpusDir(t), "threads", "ceph-devel")
	derived := readDerived(t, filepath.Join(base, "DERIVED-thread-structure.tsv"))
	entries, err := os.ReadDir(base)
	if err != nil {
		t.Fatal(err)
	}

	var folders, messages, chained, keyed, replies int
	seen := map[string]bool{}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		folder := e.Name()
		folders++
		t.Run(folder, func(t *testing.T) {
			mails := readCorpusDir(t, filepath.Join(base, folder), func(n string) bool { return strings.HasSuffix(n, ".eml") })
			roots, ok := cephRoots[folder]
			if !ok {
				t.Fatalf("no expected roots for folder %s", folder)
			}
			if len(mails) != len(roots) {
				t.Fatalf("%d messages, expected roots for %d", len(mails), len(roots))
			}
			messages += len(mails)

			byID := map[string]corpusMail{}
			for _, m := range mails {
				byID[m.own] = m
			}
			threads := make([]Thread, len(mails))
			for i, m := range mails {
				seen[folder+"/"+m.path] = true
				threads[i] = checkMail(t, m)

				// The derived table agrees with what the parser reads.
				row, ok := derived[folder+"/"+m.path]
				if !ok {
					t.Errorf("%s: not in DERIVED-thread-structure.tsv", m.path)
				} else {
					if NormalizeID(row.messageID) != m.own {
						t.Errorf("%s: Message-ID %q, derived %q", m.path, m.own, row.messageID)
					}
					if len(m.refs) != row.nRefs {
						t.Errorf("%s: %d References ids %q, derived %d", m.path, len(m.refs), m.refs, row.nRefs)
					}
					if (len(m.irt) > 0) != row.hasIRT {
						t.Errorf("%s: In-Reply-To %q, derived has_in_reply_to %v", m.path, m.irt, row.hasIRT)
					}
					// Where the parent named by In-Reply-To is in the
					// folder, reply_to is that message's id.
					if p, ok := byID[threads[i].Parent]; ok && len(m.irt) > 0 {
						replies++
						if threads[i].ReplyToID() != EmailID(p.h.MessageID) {
							t.Errorf("%s: ReplyToID %q, want the id of %s", m.path, threads[i].ReplyToID(), p.path)
						}
						if NormalizeID(row.parentID) != threads[i].Parent {
							t.Errorf("%s: Parent %q, derived %q", m.path, threads[i].Parent, row.parentID)
						}
					}
				}

				// The hand-read root.
				want := roots[i]
				if n, err := strconv.Atoi(want); err == nil {
					want = mails[n-1].h.MessageID
				}
				if wantKey := KeyPrefix + NormalizeID(want); threads[i].Key != wantKey {
					t.Errorf("%s: key %q, want %q", m.path, threads[i].Key, wantKey)
				} else {
					keyed++
				}
			}

			// A message whose References chain is all in the folder and
			// starts at a message without parents gets the key of the
			// folder's first message, when that one is the root.
			if threads[0].IsRoot {
				for i, m := range mails {
					if !completeChain(m, byID) {
						continue
					}
					chained++
					if threads[i].Key != threads[0].Key {
						t.Errorf("%s: key %q, want the first message's %q", m.path, threads[i].Key, threads[0].Key)
					}
				}
			}

			// Messages with References share one key, except where the
			// chain breaks (the irt-only folders: two keys each, above).
			keys := map[string]bool{}
			for i, m := range mails {
				if len(m.refs) > 0 {
					keys[threads[i].Key] = true
				}
			}
			want := 1
			if strings.HasPrefix(folder, "irt-only-") {
				want = 2
			}
			if len(mails) > 1 && len(keys) != want {
				t.Errorf("messages with References have %d keys, want %d: %v", len(keys), want, keys)
			}
		})
	}

	var missing []string
	for k := range derived {
		if !seen[k] {
			missing = append(missing, k)
		}
	}
	slices.Sort(missing)
	t.Logf("ceph-devel: %d folders, %d messages; %d keys as read by hand; %d complete References chains on the first message's key; %d reply_to checked against the parent file",
		folders, messages, keyed, chained, replies)
	if len(missing) > 0 {
		t.Logf("ceph-devel: %d rows of DERIVED-thread-structure.tsv have no file (folders absent from the corpus): %s … %s",
			len(missing), missing[0], missing[len(missing)-1])
	}
	if messages == 0 {
		t.Fatal("no messages read")
	}
}

// completeChain reports whether every id of m's References names a message
// of the folder and the first of them a message without parents.
func completeChain(m corpusMail, byID map[string]corpusMail) bool {
	if len(m.refs) == 0 {
		return false
	}
	for _, id := range m.refs {
		if _, ok := byID[id]; !ok {
			return false
		}
	}
	first := byID[m.refs[0]]
	return len(first.refs) == 0 && len(first.irt) == 0
}

// notmuchGroups joins messages the way notmuch does, by any id they share
// (Message-ID, References, In-Reply-To), and returns the groups of files.
func notmuchGroups(mails []corpusMail) [][]corpusMail {
	parent := map[string]string{}
	var find func(string) string
	find = func(x string) string {
		if p, ok := parent[x]; ok && p != x {
			r := find(p)
			parent[x] = r
			return r
		}
		parent[x] = x
		return x
	}
	union := func(a, b string) { parent[find(a)] = find(b) }
	for _, m := range mails {
		find(m.own)
		for _, id := range append(slices.Clone(m.refs), m.irt...) {
			union(id, m.own)
		}
	}
	byRoot := map[string][]corpusMail{}
	var order []string
	for _, m := range mails {
		r := find(m.own)
		if _, ok := byRoot[r]; !ok {
			order = append(order, r)
		}
		byRoot[r] = append(byRoot[r], m)
	}
	var out [][]corpusMail
	for _, r := range order {
		out = append(out, byRoot[r])
	}
	return out
}

// cleanRoot returns R when every file of the group either is R with no
// References and no In-Reply-To, or has References starting with R.
func cleanRoot(group []corpusMail) (string, bool) {
	root := ""
	for _, m := range group {
		var r string
		switch {
		case len(m.refs) > 0:
			r = m.refs[0]
		case len(m.irt) == 0:
			r = m.own
		default:
			return "", false
		}
		if root != "" && r != root {
			return "", false
		}
		root = r
	}
	return root, root != ""
}

// agreement checks seed 003 against the notmuch grouping: in every group
// whose files all have References starting at the group's root (or are that
// root), every file has key email-thread:<root>, and no other group has it.
func agreement(t *testing.T, corpus string, mails []corpusMail) (groups, clean int) {
	t.Helper()
	keyGroup := map[string]int{}
	var split, keysInUnclean int
	for g, group := range notmuchGroups(mails) {
		root, ok := cleanRoot(group)
		keys := map[string]bool{}
		for _, m := range group {
			th := checkMail(t, m)
			keys[th.Key] = true
			if ok && th.Key != KeyPrefix+root {
				t.Errorf("%s: key %q, want %q", m.path, th.Key, KeyPrefix+root)
			}
			if other, dup := keyGroup[th.Key]; dup && other != g {
				t.Errorf("%s: key %q also used by another notmuch thread", m.path, th.Key)
			}
			keyGroup[th.Key] = g
		}
		groups++
		if ok {
			clean++
		} else {
			keysInUnclean += len(keys)
			if len(keys) > 1 {
				split++
			}
		}
	}
	t.Logf("%s: %d files, %d notmuch threads; %d with References starting at the root agree with seed 003; %d others, %d of them split by seed 003 into %d keys in all",
		corpus, len(mails), groups, clean, groups-clean, split, keysInUnclean)
	return groups, clean
}

// expectedThread is a line of notmuch's `notmuch search "*"` output.
type expectedThread struct {
	subject      string
	total, files int
}

var searchLine = regexp.MustCompile(`^thread:XXX\s+(\S+) \[(\d+)/(\d+)(?:\((\d+)\))?\] [^;]*; (.*) \([^()]*\)$`)

// readSearchAll reads the corpus threads of T080's search output; the
// messages dated 2000-01-01 were added by that test and are not in the corpus.
func readSearchAll(t *testing.T, path string) []expectedThread {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []expectedThread
	for _, line := range strings.Split(string(b), "\n") {
		m := searchLine.FindStringSubmatch(line)
		if m == nil || m[1] == "2000-01-01" {
			continue
		}
		total, _ := strconv.Atoi(m[3])
		files := total
		if m[4] != "" {
			files, _ = strconv.Atoi(m[4])
		}
		out = append(out, expectedThread{subject: m[5], total: total, files: files})
	}
	return out
}

var replyPrefixes = regexp.MustCompile(`^(?i:(re|aw|sv)\s*:\s*)+`)

// baseSubject strips the reply prefixes, as notmuch shows thread subjects.
func baseSubject(s string) string { return replyPrefixes.ReplaceAllString(s, "") }

func TestCorpusNotmuch(t *testing.T) {
	base := filepath.Join(testutil.CorpusDir(t), "threads", "notmuch")
	all := func(string) bool { return true }

	t.Run("default", func(t *testing.T) {
		mails := readCorpusDir(t, filepath.Join(base, "default"), all)
		expected := readSearchAll(t, filepath.Join(base, "expected", "T080-search-all.expected.txt"))
		if len(expected) == 0 {
			t.Fatal("no expected threads read")
		}

		// The expected output names threads by subject and counts their
		// messages and files. Match it against the seed 003 keys: each
		// expected thread is exactly one key, with as many messages and
		// files. This holds on this corpus because every reply's
		// References start at its thread's root (checked by agreement).
		byKey := map[string][]corpusMail{}
		for _, m := range mails {
			k := EmailThread(m.h, "").Key
			byKey[k] = append(byKey[k], m)
		}
		if len(byKey) != len(expected) {
			t.Errorf("%d keys, notmuch finds %d threads", len(byKey), len(expected))
		}
		matched := map[string]bool{}
		for _, e := range expected {
			var hits []string
			for k, group := range byKey {
				if slices.ContainsFunc(group, func(m corpusMail) bool { return baseSubject(m.subject) == e.subject }) {
					hits = append(hits, k)
				}
			}
			if len(hits) != 1 {
				t.Errorf("thread %q: %d keys hold that subject: %q", e.subject, len(hits), hits)
				continue
			}
			group := byKey[hits[0]]
			ids := map[string]bool{}
			for _, m := range group {
				ids[m.own] = true
			}
			if len(ids) != e.total || len(group) != e.files {
				t.Errorf("thread %q: key %s has %d messages in %d files, notmuch %d in %d", e.subject, hits[0], len(ids), len(group), e.total, e.files)
			}
			matched[hits[0]] = true
		}
		t.Logf("default: %d files, %d keys, %d expected threads, %d matched by subject with equal counts", len(mails), len(byKey), len(expected), len(matched))

		groups, clean := agreement(t, "default", mails)
		if groups != len(expected) {
			t.Errorf("notmuch grouping by shared ids gives %d threads, the expected output %d", groups, len(expected))
		}
		if clean != groups {
			t.Logf("default: %d threads where seed 003 is not compared", groups-clean)
		}
	})

	// No expected output of these two corpora is in the shared corpus: the
	// comparison is with the grouping notmuch makes (any shared id).
	t.Run("lkml", func(t *testing.T) {
		mails := readCorpusDir(t, filepath.Join(base, "lkml"), all)
		agreement(t, "lkml", mails)
		yes := 0
		for _, m := range mails {
			if len(m.refs) > 0 && m.refs[0] == "yes" {
				yes++
			}
		}
		t.Logf("lkml: %d files have References starting with the placeholder <yes>: seed 003 puts them all under %q", yes, KeyPrefix+"yes")

		// gmane rewrote the ids in In-Reply-To (…-l3A5Bk7waGM@public.gmane.org)
		// but not in References: reply_to then names no message of the corpus.
		ids := map[string]bool{}
		for _, m := range mails {
			ids[m.own] = true
		}
		var dangling, lastRefKnown int
		for _, m := range mails {
			if len(m.irt) > 0 && !ids[m.irt[0]] {
				dangling++
				if len(m.refs) > 0 && ids[m.refs[len(m.refs)-1]] {
					lastRefKnown++
				}
			}
		}
		t.Logf("lkml: %d files have an In-Reply-To naming no message of the corpus (reply_to dangles); for %d of them the last References id names one", dangling, lastRefKnown)
	})

	t.Run("duplicate", func(t *testing.T) {
		mails := readCorpusDir(t, filepath.Join(base, "duplicate"), all)
		agreement(t, "duplicate", mails)
		// Copies of one message (same Message-ID) have one id, but their
		// keys come from their own References, which differ between copies.
		keys := map[string]map[string]bool{}
		for _, m := range mails {
			id := EmailID(m.h.MessageID)
			if keys[id] == nil {
				keys[id] = map[string]bool{}
			}
			keys[id][EmailThread(m.h, "").Key] = true
		}
		for id, k := range keys {
			if len(k) > 1 {
				t.Logf("duplicate: %s has %d copies' keys: %d distinct", id, len(k), len(k))
			}
		}
		t.Logf("duplicate: %d files, %d distinct Message-IDs", len(mails), len(keys))
	})
}
