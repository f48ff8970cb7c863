package replay

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// WriteMarkdown writes rep as Markdown, for a pull request, an issue or a
// document: per policy one table of its algorithms and the top keys of its
// own. Keys are written as code, with backticks and pipes escaped.
func WriteMarkdown(w io.Writer, rep *Report) error {
	p := &printer{w: w}
	in := rep.Input
	p.printf("%s records", num(in.Records))
	if !in.First.IsZero() {
		p.printf(" from %s to %s UTC", in.First.UTC().Format("2006-01-02 15:04:05"), in.Last.UTC().Format("15:04:05"))
	}
	if in.Skipped > 0 {
		p.printf("; %s lines skipped", num(in.Skipped))
	}
	if in.OutOfOrder > 0 {
		p.printf("; %s logged earlier than a record before them, decided at the later time", num(in.OutOfOrder))
	}
	if in.Unmatched > 0 {
		p.printf("; %s subject to no policy", num(in.Unmatched))
	}
	if in.Stopped > 0 {
		p.printf("; %s denied by a policy before later ones could decide them", num(in.Stopped))
	}
	p.printf(".\n")
	for _, group := range byPolicy(rep.Results) {
		own := group[0]
		p.printf("\n**%s**: %d per %s, burst %d.\n\n", own.Policy, own.Limit.Rate, own.Limit.Period, own.Limit.Burst)
		header := "| algorithm | denied | denied keys | well-behaved keys denied (their denials) | worst window / rate |"
		rule := "| --- | --- | --- | --- | --- |"
		if rep.Target > 0 {
			header += fmt.Sprintf(" smallest limit denying at most %s of keys |", strconv.FormatFloat(rep.Target*100, 'g', -1, 64)+"%")
			rule += " --- |"
		}
		p.printf("%s\n%s\n", header, rule)
		for _, r := range group {
			name := r.Algorithm
			if r.Own {
				name += " (the policy's)"
			}
			denied := num(r.Denied)
			if r.Requests > 0 {
				denied += " (" + pct(r.Denied, r.Requests) + "%)"
			}
			p.printf("| %s | %s | %s of %s | %s (%s) | %s / %s = %s |", name, denied,
				num(r.DeniedKeys), num(r.Keys), num(r.WellBehavedKeys), num(r.WellBehavedDenials),
				num(r.Worst.Admitted), num(r.Worst.Rate), ratio(r.Worst.Admitted, r.Worst.Rate))
			if rep.Target > 0 {
				switch {
				case r.Target == nil || r.Target.Limit == nil:
					p.printf(" none up to 16x |")
				default:
					l := r.Target.Limit
					p.printf(" %d per %s, burst %d |", l.Rate, l.Period, l.Burst)
				}
			}
			p.printf("\n")
		}
		for _, r := range group {
			if r.OverCapacity > 0 {
				p.printf("\n%s: %s requests cost more than the limit can ever allow, denied.\n", r.Algorithm, num(r.OverCapacity))
			}
		}
		if len(own.TopKeys) > 0 {
			p.printf("\nTop keys by denials under %s:", own.Algorithm)
			for i, k := range own.TopKeys {
				sep := ","
				if i == 0 {
					sep = ""
				}
				well := ""
				if k.WellBehaved {
					well = ", within the rate on average"
				}
				p.printf("%s %s (%s of %s denied%s)", sep, codeSpan(k.Key), num(k.Denied), num(k.Requests), well)
			}
			p.printf(".\n")
		}
	}
	return p.err
}

// codeSpan writes s as Markdown code that a table keeps in one cell.
func codeSpan(s string) string {
	s = strings.NewReplacer("`", "'", "|", `\|`, "\n", " ", "\r", " ").Replace(s)
	return "`" + s + "`"
}
