package email

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/monoco/courier/internal/testutil"
)

// Issue 21: DKIM re-opened the raw message from the dropzone even when the
// IMAP source held its bytes in memory. With NormalizeOptions.Raw it reads
// those, and finds what it finds in the stored copy: the same signatures,
// results and verdict, good and bad.
func TestDKIMFromRawMatchesStoredCopy(t *testing.T) {
	dns := newTestDNS()
	k := newKey(t, dns, "example.com", "s1", true)
	good := k.sign(t, strings.ReplaceAll(string(typicalUnsigned()), "\r\n", "\n"))
	bad := bytes.Replace(good, []byte("Subject: "), []byte("Subject: Re: "), 1)
	s := testutil.NewDropzone(t, nil)
	for name, raw := range map[string][]byte{"good": good, "tampered": bad} {
		t.Run(name, func(t *testing.T) {
			var got [2]any
			for i, mem := range []bool{false, true} {
				opts := normOptions()
				opts.Verifier = NewVerifier(&VerifierOptions{LookupTXT: dns.LookupTXT})
				batch := s.NewBatch()
				obj, err := batch.Put(bytes.NewReader(raw))
				if err != nil {
					t.Fatal(err)
				}
				if mem {
					opts.Raw = raw
					batch.Abort() // nothing left to re-open: the bytes must do
					batch = s.NewBatch()
				}
				m, err := Normalize(bytes.NewReader(raw), batch, obj, opts)
				batch.Abort()
				if err != nil {
					t.Fatal(err)
				}
				got[i] = *m.Metadata.Extra.Auth
			}
			if !reflect.DeepEqual(got[0], got[1]) {
				t.Errorf("from the stored copy:\n%+v\nfrom memory:\n%+v", got[0], got[1])
			}
		})
	}
}
