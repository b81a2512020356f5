package bench

import (
	"fmt"
	"io"
	"sort"
	"time"

	"tfc/runtime/device"
	"tfc/runtime/device/gpu"
	"tfc/runtime/lanes"
)

// ProfileMethod says how the kernel profile is taken.
const ProfileMethod = "After the decode measure, the same batch runs again with every kernel launch timed on the " +
	"device between two events (graph replay off while timing, so the wall times of this run are not the " +
	"measure's). The backend's profile is read after each round; profile holds the decode window's rounds, " +
	"prefill_profile the rounds before it (the prompts' chunks), and the vision profile one more run of the " +
	"tower after its measure: launches_per_round = launches / rounds, us_per_launch = device time / launches, " +
	"share = the kernel's device time over all kernels' device time in the window; tflops and gb_per_s = the " +
	"floating-point operations and bytes its schedule gives a launch at its rows (a linear: 2·N·K a row; its weights " +
	"once and its rows' X, residual and Y) over its device time, of_peak = tflops over the card's listed dense BF16 rate."

// KernelProfile is the device time of the kernels of a window of rounds.
type KernelProfile struct {
	Rounds           int           `json:"rounds"`
	KernelMsPerRound float64       `json:"kernel_ms_per_round"` // all kernels' device time a round
	MsPerRound       float64       `json:"ms_per_round"`        // wall time a round of the timed run
	Kernels          []KernelShare `json:"kernels"`             // by device time, largest first
	Peak             *Peak         `json:"peak,omitempty"`      // the card's listed rates, when known
	Method           string        `json:"method"`
}

// KernelShare is one kernel's part of a window.
type KernelShare struct {
	Name             string  `json:"name"`
	LaunchesPerRound float64 `json:"launches_per_round"`
	UsPerLaunch      float64 `json:"us_per_launch"`
	Share            float64 `json:"share"`
	TFLOPS           float64 `json:"tflops,omitempty"`   // where the schedule gives the launch's work
	GBps             float64 `json:"gb_per_s,omitempty"` //
	OfPeak           float64 `json:"of_peak,omitempty"`  // TFLOPS over the card's listed BF16 rate
}

// launchCounter is a backend that counts graph-replayed and plain launches.
type launchCounter interface{ Launches() gpu.LaunchCounts }

// waiter is a backend that counts the time the host spent blocked on the device.
type waiter interface{ Waited() time.Duration }

// profileDecode runs batch b again with kernel timing on and profiles its decode window and the
// prefill rounds before it.
func profileDecode(s *lanes.Scheduler, tm *timedModel, prof device.Profiler, vocab int32, b int, o Options) (decode, prefill *KernelProfile, err error) {
	prof.Profile(true)
	tm.profileWith(prof)
	run, err := runBatch(s, tm, vocab, b, o.PromptTokens, o.NewTokens, o.Seed)
	tm.profileWith(nil)
	prof.Profile(false)
	if err != nil {
		return nil, nil, err
	}
	lo, hi, err := decodeWindow(run.rounds, b)
	if err != nil {
		return nil, nil, err
	}
	decode = kernelProfile(run.rounds[lo-1].profile, run.rounds[hi].profile, hi-lo+1)
	decode.MsPerRound = ms(run.rounds[hi].end.Sub(run.rounds[lo-1].end)) / float64(hi-lo+1)
	prefill = kernelProfile(nil, run.rounds[lo-1].profile, lo)
	prefill.MsPerRound = ms(run.rounds[lo-1].end.Sub(run.rounds[0].start)) / float64(lo)
	return decode, prefill, nil
}

// profileVision runs the tower once more with kernel timing on and profiles it as one round.
func profileVision(prof device.Profiler, run func() error) (*KernelProfile, error) {
	prof.Profile(true)
	t := time.Now()
	err := run()
	wall := time.Since(t)
	after := prof.Profiled()
	prof.Profile(false)
	if err != nil {
		return nil, err
	}
	p := kernelProfile(nil, after, 1)
	p.MsPerRound = ms(wall)
	return p, nil
}

// kernelProfile is what the profile gained from before to after, over rounds rounds.
func kernelProfile(before, after []device.KernelTime, rounds int) *KernelProfile {
	base := map[string]device.KernelTime{}
	for _, k := range before {
		base[k.Name] = k
	}
	p := &KernelProfile{Rounds: rounds, Kernels: []KernelShare{}, Method: ProfileMethod}
	var total time.Duration
	type gain struct {
		name         string
		launches     int
		t            time.Duration
		flops, bytes float64
	}
	var gains []gain
	for _, k := range after {
		b := base[k.Name]
		g := gain{k.Name, k.Launches - b.Launches, k.Total - b.Total, k.Flops - b.Flops, k.Bytes - b.Bytes}
		if g.launches > 0 {
			gains = append(gains, g)
			total += g.t
		}
	}
	sort.SliceStable(gains, func(i, j int) bool { return gains[i].t > gains[j].t })
	for _, g := range gains {
		ks := KernelShare{Name: g.name, LaunchesPerRound: float64(g.launches) / float64(rounds),
			UsPerLaunch: float64(g.t.Nanoseconds()) / 1e3 / float64(g.launches)}
		if total > 0 {
			ks.Share = float64(g.t) / float64(total)
		}
		if s := g.t.Seconds(); s > 0 {
			ks.TFLOPS, ks.GBps = g.flops/s/1e12, g.bytes/s/1e9
		}
		p.Kernels = append(p.Kernels, ks)
	}
	p.KernelMsPerRound = ms(total) / float64(rounds)
	return p
}

// withPeak sets the card's listed rates and each kernel's share of its BF16 rate.
func (p *KernelProfile) withPeak(desc string) *KernelProfile {
	if pk, ok := peakOf(desc); ok && p != nil {
		p.Peak = &pk
		for i := range p.Kernels {
			p.Kernels[i].OfPeak = p.Kernels[i].TFLOPS / pk.TFLOPS
		}
	}
	return p
}

// WriteTable prints the profile of what (e.g. "decode batch 8") as a table.
func (p *KernelProfile) WriteTable(w io.Writer, what string) {
	fmt.Fprintf(w, "bench: %s: kernels over %d rounds, %.3f ms of device time a round (%.3f ms wall a round while timed)\n",
		what, p.Rounds, p.KernelMsPerRound, p.MsPerRound)
	width := len("kernel")
	for _, k := range p.Kernels {
		width = max(width, len(k.Name))
	}
	peak := ""
	if p.Peak != nil {
		peak = fmt.Sprintf("of %s", p.Peak.Card)
	}
	fmt.Fprintf(w, "  %-*s  %14s  %10s  %6s  %8s  %8s  %s\n", width, "kernel", "launches/round", "us/launch", "share", "TFLOP/s", "GB/s", peak)
	for _, k := range p.Kernels {
		rates := ""
		if k.TFLOPS > 0 {
			rates = fmt.Sprintf("  %8.1f  %8.0f", k.TFLOPS, k.GBps)
			if p.Peak != nil {
				rates += fmt.Sprintf("  %5.1f%%", 100*k.OfPeak)
			}
		}
		fmt.Fprintf(w, "  %-*s  %14.2f  %10.2f  %5.1f%%%s\n", width, k.Name, k.LaunchesPerRound, k.UsPerLaunch, 100*k.Share, rates)
	}
}
