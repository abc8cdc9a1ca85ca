package dropzone_test

import (
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/monoco/courier/dropzone"
)

func Example() {
	ws, err := os.MkdirTemp("", "workspace")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(ws)

	s, err := dropzone.Open(filepath.Join(ws, ".monoco", "dropzone"), &dropzone.Options{MaxSize: 25 << 20})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	// The attachments of one message: staged, then committed together.
	b := s.NewBatch()
	o, err := b.Put(strings.NewReader("hello\n"))
	if err != nil {
		b.Abort()
		log.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		log.Fatal(err)
	}
	fmt.Println(o.ID)
	fmt.Println(o.Path, o.Size)
	fmt.Println(dropzone.SanitizeName(`C:\Users\me\..\notes .txt`))

	f, err := s.Open(o.ID)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	content, _ := io.ReadAll(f)
	fmt.Printf("%q\n", content)
	// Output:
	// sha256:5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03
	// sha256/58/5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03 6
	// notes .txt
	// "hello\n"
}
