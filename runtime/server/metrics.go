package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"tfc/runtime/lanes"
)

// metrics are the Prometheus series, named after vLLM's with the tfc: prefix.
type metrics struct {
	reg            *prometheus.Registry
	ttft, itl, e2e prometheus.Histogram
	// where requests' time goes, stage by stage
	imageDecode, imagePreprocess, vision, queue, prefill, decode prometheus.Histogram
	finished                                                     *prometheus.CounterVec
	refused                                                      prometheus.Counter
}

var (
	latencyBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}
	tokenBuckets   = []float64{0.001, 0.0025, 0.005, 0.01, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5}
)

func newMetrics(s *Server) *metrics {
	labels := prometheus.Labels{"model_name": s.cfg.Name}
	m := &metrics{reg: prometheus.NewRegistry()}
	hist := func(name, help string, buckets []float64) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tfc:" + name, Help: help, Buckets: buckets, ConstLabels: labels})
	}
	m.ttft = hist("time_to_first_token_seconds", "Time from a request's arrival to its first token.", latencyBuckets)
	m.itl = hist("inter_token_latency_seconds", "Time between a request's consecutive tokens.", tokenBuckets)
	m.e2e = hist("e2e_request_latency_seconds", "Time from a request's arrival to its last token.", latencyBuckets)
	m.imageDecode = hist("image_decode_seconds", "Time a request's images took to decode.", tokenBuckets)
	m.imagePreprocess = hist("image_preprocess_seconds", "Time a request's images took to resize, normalise and cut into patches.", tokenBuckets)
	m.vision = hist("vision_tower_seconds", "Time the vision tower took on a request's images.", latencyBuckets)
	m.queue = hist("request_queue_time_seconds", "Time a request waited for a lane.", latencyBuckets)
	m.prefill = hist("request_prefill_time_seconds", "Time from a request's lane to its first token, the vision tower excluded.", latencyBuckets)
	m.decode = hist("request_decode_time_seconds", "Time from a request's first token to its last.", latencyBuckets)
	m.finished = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tfc:request_success_total",
		Help: "Requests finished, by reason (stop, length, cancelled, error).", ConstLabels: labels}, []string{"finished_reason"})
	m.refused = prometheus.NewCounter(prometheus.CounterOpts{Name: "tfc:request_queue_full_total",
		Help: "Requests refused with 429 because every lane was busy and the queue was full.", ConstLabels: labels})
	stat := func(f func(lanes.Stats) float64) func() float64 {
		return func() float64 {
			ld := s.ready.Load()
			if ld == nil {
				return 0
			}
			return f(ld.lanes.Stats())
		}
	}
	gauge := func(name, help string, f func(lanes.Stats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tfc:" + name, Help: help, ConstLabels: labels}, stat(f))
	}
	counter := func(name, help string, f func(lanes.Stats) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "tfc:" + name, Help: help, ConstLabels: labels}, stat(f))
	}
	m.reg.MustRegister(m.ttft, m.itl, m.e2e, m.finished, m.refused,
		m.imageDecode, m.imagePreprocess, m.vision, m.queue, m.prefill, m.decode,
		gauge("num_requests_running", "Requests holding a lane.", func(st lanes.Stats) float64 { return float64(st.Running) }),
		gauge("num_requests_waiting", "Requests waiting for a lane.", func(st lanes.Stats) float64 { return float64(st.Waiting) }),
		gauge("kv_cache_usage_perc", "Fraction of KV pages held by running requests.", func(st lanes.Stats) float64 {
			if st.Pages == 0 {
				return 0
			}
			return float64(st.PagesUsed) / float64(st.Pages)
		}),
		counter("prompt_tokens_total", "Prompt tokens computed (cached ones excluded).", func(st lanes.Stats) float64 { return float64(st.PromptTokens) }),
		counter("generation_tokens_total", "Tokens generated.", func(st lanes.Stats) float64 { return float64(st.GeneratedTokens) }),
		counter("prefix_cache_queries_total", "Prompt tokens looked up in the prompt cache.", func(st lanes.Stats) float64 { return float64(st.PrefixQueries) }),
		counter("prefix_cache_hits_total", "Prompt tokens found in the prompt cache.", func(st lanes.Stats) float64 { return float64(st.PrefixHits) }),
		counter("spec_decode_num_draft_tokens_total", "Copy-draft tokens proposed.", func(st lanes.Stats) float64 { return float64(st.DraftsProposed) }),
		counter("spec_decode_num_accepted_tokens_total", "Copy-draft tokens accepted.", func(st lanes.Stats) float64 { return float64(st.DraftsAccepted) }),
	)
	return m
}
