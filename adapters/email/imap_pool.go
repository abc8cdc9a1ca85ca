package email

import (
	"runtime"
	"sync"

	"github.com/emersion/go-imap/v2"

	"github.com/monoco/courier/schema"
)

// normalisePool normalises fetched messages on one worker per CPU and gives
// the results back in the order the messages came.
type normalisePool struct {
	jobs    chan int
	fms     []*fetchedMessage
	results []normalised
	mu      sync.Mutex
	wg      sync.WaitGroup
	fn      func(*fetchedMessage) (*schema.Message, error)
	err     error
}

type normalised struct {
	uid imap.UID
	m   *schema.Message
}

func newNormalisePool(fn func(*fetchedMessage) (*schema.Message, error)) *normalisePool {
	p := &normalisePool{jobs: make(chan int, 64), fn: fn}
	for i := 0; i < runtime.GOMAXPROCS(0); i++ {
		p.wg.Add(1)
		go p.work()
	}
	return p
}

func (p *normalisePool) add(fm *fetchedMessage) {
	p.mu.Lock()
	i := len(p.fms)
	p.fms = append(p.fms, fm)
	p.results = append(p.results, normalised{})
	p.mu.Unlock()
	p.jobs <- i
}

func (p *normalisePool) work() {
	defer p.wg.Done()
	for i := range p.jobs {
		p.mu.Lock()
		fm := p.fms[i]
		p.mu.Unlock()
		m, err := p.fn(fm)
		p.mu.Lock()
		if err != nil && p.err == nil {
			p.err = err
		}
		p.results[i] = normalised{uid: fm.uid, m: m}
		p.fms[i] = nil // its raw bytes can go
		p.mu.Unlock()
	}
}

// wait returns the results in order, or the first error.
func (p *normalisePool) wait() ([]normalised, error) {
	close(p.jobs)
	p.wg.Wait()
	return p.results, p.err
}
