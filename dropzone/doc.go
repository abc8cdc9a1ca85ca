// Package dropzone stores attachments (artifacts) by content.
//
// # Layout
//
// A dropzone is one directory, normally <workspace>/.monoco/dropzone:
//
//	dropzone/
//	├── sha256/ab/ab12…ef   # one read-only (0440) file per distinct content
//	└── .tmp/               # staging for writes not yet committed
//
// An object's id is "sha256:" followed by the 64 lowercase hex digits of the
// SHA-256 of its bytes, and its path, relative to the dropzone and always
// slash-separated, is "sha256/<first two hex digits>/<64 hex digits>". The id
// says where the bytes live and what they are, so identical content is stored
// once: putting the same bytes again yields the same [Object] and no new file.
//
// # Writing: two phases
//
// Writes follow the two-phase shape of maddy's delivery targets. [Batch.Put]
// streams a reader into a temporary file under .tmp/ while hashing it, with a
// fixed-size buffer, so memory stays flat whatever the size of the artifact.
// Nothing appears at a final path until [Batch.Commit], which fsyncs the
// temporary files (several at a time; they are created read-only), renames
// each into place and fsyncs every directory it touched before returning; a
// batch of 16 or more objects uses one syncfs(2) of the file system before
// the renames and one after instead. When Commit
// returns nil, every object of the batch is durable. [Batch.Abort] removes the
// temporary files. A reader never sees a partial file at a final path: a file
// is complete and synced before it is renamed there, and rename is atomic.
// Two batches committing the same content concurrently both succeed and leave
// one intact file.
//
// # Integrity
//
// An object is deduped against only once its bytes are checked: Put hashes
// the object already stored under the id it computed, and when that object
// is damaged (its hash is not its id, whatever its size) the new copy is
// committed over it, which repairs it. The stored object is opened once,
// with O_NOFOLLOW, and checked on what was opened (a regular file of the
// size); a Store remembers the objects it verified (inode, size, change
// time after marking them in use) and does not hash one again while they
// stay the same: a write in place, a copy back or a link swapped in moves
// them. Content that fits in Put's buffer (64 KiB) is hashed before any
// temporary file is made, so a put of such content already stored makes
// none. Readers ([Store.Open], [Batch.Open])
// do not hash what they open: agents read objects by path, bypassing any
// check this package could make, and Courier's own reads (an attachment
// being sent, up to the artifact limit) would pay a second full read for a
// damage that only the owner of the files, or the disk, can cause; the
// write path is where a bad object would otherwise be made permanent.
//
// Between Put and Commit, [Batch.Open] reads a staged object back from its
// temporary file (read-only), so that a caller can stream a message into the
// batch once and then parse it from disk; after Commit it opens the object
// at its final path.
//
// Temporary files left by a crash are removed by [Store.RecoverTemp], to be
// called at start-up.
//
// # Sweeping
//
// Objects are never removed on their own: [Store.Sweep] removes those a
// caller found unreferenced (`courier prune`), unless they were used since
// a time the caller gives. A Put deduped against a stored object, and
// [Store.Keep], mark it used (its modification time) under a shared
// flock(2) of the dropzone folder, which Sweep takes exclusively; see
// sweep.go. [Store.Hold] keeps sweeps off while a backup copies objects.
//
// # Size limit
//
// [Options.MaxSize] caps each artifact. Put stops reading as soon as the limit
// is passed (it reads at most MaxSize+1 bytes), removes its temporary file and
// returns an error wrapping [ErrTooLarge]. An artifact of exactly MaxSize bytes
// is accepted.
//
// # Confinement
//
// Every file operation goes through an [os.Root] opened on the dropzone
// directory, so no path the package uses can resolve outside it, symbolic
// links included: a link that leads out of the dropzone makes the operation
// fail instead of being followed. Ids are validated by [ParseID] before they
// become paths; a malformed id is an error naming it (see [ErrInvalidID]), never a
// path. Only [Store.PutFile] reads outside the dropzone, from the file it is
// given. [Store.Abs] hands out an absolute path for programs that need one;
// whoever opens it is not confined by this package.
//
// # Names
//
// Content addressing means names never touch the disk here, but callers keep
// an attachment's name in metadata. [SanitizeName] makes such a name safe to
// store and show: one path element, no "..", no control or bidirectional
// formatting characters, valid UTF-8, at most 255 bytes.
package dropzone
