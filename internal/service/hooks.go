package service

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/notify"
)

// HookNames are the names of the hooks of courier.notify, in order.
func HookNames(cfg *config.Config) []string {
	var out []string
	for _, h := range cfg.Courier.Notify {
		out = append(out, h.Name)
	}
	return out
}

// HookStates is each hook's state (notify.States) for the report; nil
// without hooks, or when the database cannot say (the rest of the report
// says why).
func HookStates(ctx context.Context, mb *mailbox.Mailbox, hooks []string) map[string]notify.State {
	if mb == nil {
		return nil
	}
	st, err := notify.States(ctx, mb.DB(), hooks)
	if err != nil || len(st) == 0 {
		return nil
	}
	return st
}

var (
	hookBacklogDesc = prometheus.NewDesc("courier_hook_backlog",
		"Calls queued for a hook and not yet run, those waiting for a retry included, by hook.", []string{"hook"}, nil)
	hookFailingDesc = prometheus.NewDesc("courier_hook_failing",
		"Calls of a hook that failed and wait to be tried again, by hook.", []string{"hook"}, nil)
	hookDeadDesc = prometheus.NewDesc("courier_hook_dead",
		"Calls of a hook set aside in its dead letters (courier hooks retry runs them again), by hook.", []string{"hook"}, nil)
)

var hookDescs = []*prometheus.Desc{hookBacklogDesc, hookFailingDesc, hookDeadDesc}

// collectHooks gives each hook's gauges.
func (s *Service) collectHooks(ctx context.Context, ch chan<- prometheus.Metric) {
	for name, st := range HookStates(ctx, s.Mailbox, s.Hooks) {
		ch <- prometheus.MustNewConstMetric(hookBacklogDesc, prometheus.GaugeValue, float64(st.Backlog), name)
		ch <- prometheus.MustNewConstMetric(hookFailingDesc, prometheus.GaugeValue, float64(st.Failing), name)
		ch <- prometheus.MustNewConstMetric(hookDeadDesc, prometheus.GaugeValue, float64(st.Dead), name)
	}
}
