package replay

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteText writes rep for people: the input, then per policy one table
// of its algorithms, the worst windows, the top keys of its own algorithm
// and, with a target, the limit each algorithm needs.
func WriteText(w io.Writer, rep *Report) error {
	p := &printer{w: w}
	in := rep.Input
	p.printf("replayed %s records", num(in.Records))
	if in.Format != "" {
		p.printf(" (%s)", in.Format)
	}
	if !in.First.IsZero() {
		p.printf(", %s to %s, %s", in.First.UTC().Format(time.DateTime), in.Last.UTC().Format(time.DateTime), in.Last.Sub(in.First))
	}
	p.printf("\n")
	if in.Skipped > 0 {
		p.printf("%s lines skipped", num(in.Skipped))
		for i, e := range in.SkippedLines {
			if i == 3 {
				p.printf("; ... (--json lists the first %d)", len(in.SkippedLines))
				break
			}
			p.printf("; line %d: %s", e.Line, e.Reason)
		}
		p.printf("\n")
	}
	if in.OutOfOrder > 0 {
		p.printf("%s records logged earlier than one before them, decided at the later time\n", num(in.OutOfOrder))
	}
	if in.Unmatched > 0 {
		p.printf("%s records subject to no policy\n", num(in.Unmatched))
	}
	if in.Stopped > 0 {
		p.printf("%s records denied by a policy before later ones could decide them (policies apply in order)\n", num(in.Stopped))
	}
	for _, group := range byPolicy(rep.Results) {
		own := group[0]
		p.printf("\npolicy %s: %d per %s, burst %d (* its own algorithm)\n", own.Policy, own.Limit.Rate, own.Limit.Period, own.Limit.Burst)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "algorithm\trequests\tdenied\tdenied %\tkeys\tdenied keys\twell-behaved keys denied\ttheir denials\tworst window / rate\t")
		for _, r := range group {
			name := r.Algorithm
			if r.Own {
				name += " *"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", name, num(r.Requests), num(r.Denied), pct(r.Denied, r.Requests),
				num(r.Keys), num(r.DeniedKeys), num(r.WellBehavedKeys), num(r.WellBehavedDenials), ratio(r.Worst.Admitted, r.Worst.Rate))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, r := range group {
			if r.Worst.Admitted > 0 {
				p.printf("worst window, %s: %s admitted to %s in the period from %s (rate %s)\n", r.Algorithm, num(r.Worst.Admitted),
					r.Worst.Key, r.Worst.Start.Format(time.DateTime), num(r.Worst.Rate))
			}
		}
		if len(own.TopKeys) > 0 {
			p.printf("top keys by denials, %s:\n", own.Algorithm)
			for _, k := range own.TopKeys {
				note := ""
				if k.WellBehaved {
					note = "  (within the rate on average)"
				}
				p.printf("  %-40s %s requests, %s denied%s\n", k.Key, num(k.Requests), num(k.Denied), note)
			}
		}
		if rep.Target > 0 {
			p.printf("smallest limit denying at most %s of keys:\n", strconv.FormatFloat(rep.Target*100, 'g', -1, 64)+"%")
			for _, r := range group {
				switch {
				case r.Target == nil:
				case r.Target.Limit == nil:
					p.printf("  %-16s none up to 16x the policy's limit\n", r.Algorithm)
				default:
					l := r.Target.Limit
					p.printf("  %-16s %d per %s, burst %d (%.2f%% of keys denied)\n", r.Algorithm, l.Rate, l.Period, l.Burst, r.Target.DeniedKeyShare*100)
				}
			}
		}
		for _, r := range group {
			if r.OverCapacity > 0 {
				p.printf("%s: %s requests cost more than %d per %s, burst %d, can ever allow: denied\n",
					r.Algorithm, num(r.OverCapacity), r.Limit.Rate, r.Limit.Period, r.Limit.Burst)
			}
			if r.DroppedKeys > 0 {
				p.printf("%s: %s idle keys were forgotten to bound memory (--max-keys); keys and denied keys are estimates (within about 1%%)\n", r.Algorithm, num(r.DroppedKeys))
			}
		}
	}
	return p.err
}

// byPolicy groups results by policy, in order.
func byPolicy(results []Result) [][]Result {
	var groups [][]Result
	for _, r := range results {
		if n := len(groups); n > 0 && groups[n-1][0].Policy == r.Policy {
			groups[n-1] = append(groups[n-1], r)
			continue
		}
		groups = append(groups, []Result{r})
	}
	return groups
}

type printer struct {
	w   io.Writer
	err error
}

func (p *printer) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

// num writes n with thousands separators.
func num(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func pct(part, whole int64) string {
	if whole == 0 {
		return "-"
	}
	return strconv.FormatFloat(100*float64(part)/float64(whole), 'f', 2, 64)
}

func ratio(a, b int64) string {
	if b == 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(a)/float64(b), 'f', 2, 64) + "x"
}
