package email

import (
	"fmt"
	"strings"
	"testing"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/schema"
	"github.com/monoco/courier/threading"
)

// ccFlood is the mail (issue 18, item 5): a megabyte of header,
// 57,000 Cc addresses, and a References chain of 1,500 ids. It returns
// the mail, the Cc addresses and the References ids, in order.
func ccFlood(nCc, nRefs int) (raw string, cc, refs []string) {
	var b strings.Builder
	b.WriteString("From: Ann <ann@example.com>\r\nTo: agent@monoco.dev\r\nSubject: all hands\r\nMessage-ID: <flood@example.com>\r\nDate: Fri, 06 Feb 2026 18:31:15 +0100\r\n")
	b.WriteString("References:")
	for i := range nRefs {
		refs = append(refs, fmt.Sprintf("<r%04d@example.com>", i))
		b.WriteString(" " + refs[i] + "\r\n")
	}
	b.WriteString("Cc: ")
	for i := range nCc {
		cc = append(cc, fmt.Sprintf("c%05d@cc.test", i))
		if i > 0 {
			b.WriteString(",")
			if i%10 == 0 {
				b.WriteString("\r\n")
			}
			b.WriteString(" ")
		}
		b.WriteString(cc[i])
	}
	b.WriteString("\r\nContent-Type: text/plain\r\n\r\nSee you all.\r\n")
	return b.String(), cc, refs
}

// Every address of a 57,000-Cc mail is kept, and none is in the file
// past the first MaxListItems: the file keeps 1,000 of each list (the
// participants, provider_raw's, external_participants, References with
// its root first), says how many it cut and where the rest is
// (metadata.extra.overflow, parse_error), and the artifacts hold the rest,
// one item a line, so that the file's list followed by them is the whole
// list. The file is some 200 KB, not the 9.7 MB it was; the thread is
// keyed by the root of References still.
func TestCcFloodKeepsListBound(t *testing.T) {
	ws := newWorkspace(t)
	r := startReceiver(t, ws, nil, ReceiverOptions{Bounds: NewBounds(0, 0)})
	raw, cc, refs := ccFlood(57000, 1500)
	if len(raw) < 800<<10 || len(raw) > 1<<20 {
		t.Fatalf("the mail is %d bytes, not the issue's megabyte", len(raw))
	}
	name, data := ws.receiveOne(t, r.Addr(), raw)
	if len(data) > 512<<10 {
		t.Errorf("the file is %d bytes, over 512 KiB: the lists are not bounded", len(data))
	}
	testutil.ValidateInbound(t, name, data)
	m, err := schema.Decode(data)
	if err != nil {
		t.Fatal(err)
	}

	if len(m.Participants.Cc) != MaxListItems {
		t.Fatalf("participants.cc: %d, want %d", len(m.Participants.Cc), MaxListItems)
	}
	var kept []string
	for _, p := range m.Participants.Cc {
		kept = append(kept, p.Email)
	}
	checkListRest(t, ws, m, "participants.cc", "cc-rest.txt", kept, cc)
	if rawCc, _ := m.Metadata.ProviderRaw["cc"].([]any); len(rawCc) != MaxListItems {
		t.Errorf("provider_raw.cc: %d addresses, want %d", len(rawCc), MaxListItems)
	}

	// external_participants: From, To and the Cc (the receiver has no own
	// address to leave out).
	ext := append([]string{"ann@example.com", "agent@monoco.dev"}, cc...)
	checkListRest(t, ws, m, "metadata.extra.external_participants", "external-participants-rest.txt", m.Metadata.Extra.ExternalParticipants, ext)
	if m.Metadata.Extra.PersonalEligible == nil || *m.Metadata.Extra.PersonalEligible {
		t.Errorf("personal_eligible %v: a mail to 57,001 people is not personal", m.Metadata.Extra.PersonalEligible)
	}

	// References: the root first, then the last 999; the artifact holds
	// the ids between.
	rawRefs, _ := m.Metadata.ProviderRaw["references"].([]any)
	var keptRefs []string
	for _, x := range rawRefs {
		s, _ := x.(string)
		keptRefs = append(keptRefs, s)
	}
	cut := len(refs) - (MaxListItems - 1)
	want := append([]string{refs[0]}, refs[cut:]...)
	if strings.Join(keptRefs, " ") != strings.Join(want, " ") {
		t.Errorf("provider_raw.references keeps %d ids from %v to %v, want the root and the last %d", len(keptRefs), keptRefs[:min(2, len(keptRefs))], keptRefs[max(0, len(keptRefs)-1):], MaxListItems-1)
	}
	ov, ok := overflowOf(m, "provider_raw.references")
	if !ok || ov.Size != int64(len(refs)) || ov.Kept != MaxListItems {
		t.Fatalf("overflow %+v: want provider_raw.references of %d keeping %d", m.Metadata.Extra.Overflow, len(refs), MaxListItems)
	}
	if got := readRest(t, ws.dz, ov); got != strings.Join(refs[1:cut], "\n")+"\n" {
		t.Errorf("references-rest: %d bytes, not the %d ids between the root and the last %d", len(got), cut-1, MaxListItems-1)
	}
	if m.Session.ThreadKey != "email-thread:r0000@example.com" || string(m.ThreadRoot) != threading.EmailID(refs[0]) || string(m.ReplyTo) != threading.EmailID(refs[len(refs)-1]) {
		t.Errorf("thread key %q, root %q, reply_to %q: not the first and last ids of References", m.Session.ThreadKey, m.ThreadRoot, m.ReplyTo)
	}
	for _, w := range []string{"participants.cc: 57000 items", "it keeps 1000, the other 56000 are in cc-rest.txt"} {
		if !strings.Contains(string(m.Metadata.Extra.ParseError), w) {
			t.Errorf("parse_error %q does not say %q", m.Metadata.Extra.ParseError, w)
		}
	}
}

// checkListRest checks that list field keeps the first MaxListItems of
// all (kept), and that its overflow's artifact, named name, holds the
// others, one a line, so that none is lost.
func checkListRest(t *testing.T, ws *workspace, m *schema.Message, field, name string, kept, all []string) {
	t.Helper()
	if strings.Join(kept, " ") != strings.Join(all[:MaxListItems], " ") {
		t.Errorf("%s: keeps %d items, not the first %d", field, len(kept), MaxListItems)
	}
	ov, ok := overflowOf(m, field)
	if !ok || ov.Size != int64(len(all)) || ov.Kept != MaxListItems || len(ov.Artifacts) != 1 {
		t.Fatalf("overflow %+v: want %s of %d keeping %d", m.Metadata.Extra.Overflow, field, len(all), MaxListItems)
	}
	if got, want := readRest(t, ws.dz, ov), strings.Join(all[MaxListItems:], "\n")+"\n"; got != want {
		t.Errorf("%s: the rest is %d bytes, not the %d of the %d items cut", field, len(got), len(want), len(all)-MaxListItems)
	}
	for _, a := range m.Artifacts {
		if a.ID == ov.Artifacts[0] && (a.Name != name || a.MimeType != "text/plain" || a.Type != schema.ArtifactDocument) {
			t.Errorf("%s: the rest's artifact %+v", field, a)
		}
	}
}
