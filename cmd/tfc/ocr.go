package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"tfc/runtime/device"
	"tfc/runtime/image"
	"tfc/runtime/server"
)

func init() {
	var url, dir, outDir, apiKey, backend, precision, pages, task, prompt string
	var o server.Options
	c := &cobra.Command{
		Use:   "ocr FILE... (--url URL | --model DIR)",
		Short: "Read PDFs and images to markdown through /v1/ocr",
		Long: `Read PDFs and images (PNG, JPEG, WebP) to markdown, page by page, with the family's OCR
prompt. --url sends each file to a running tfc serve's /v1/ocr; --model loads the checkpoint here
and hands the same request to the same server code, without a network. The markdown goes to
stdout, each page after a line <!-- FILE page N --> (N counts from 1), or with --out to
DIR/NAME.md a file.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (url == "") == (dir == "") {
				return fmt.Errorf("give one of --url (a running server) and --model (a checkpoint folder)")
			}
			want, err := parsePages(pages)
			if err != nil {
				return err
			}
			ask := server.OCRRequest{Pages: want, Task: task}
			if cmd.Flags().Changed("prompt") {
				ask.Prompt = &prompt
			}
			for _, f := range args { // a missing file is named before a checkpoint loads
				if _, err := os.Stat(f); err != nil {
					return err
				}
			}
			outs, err := outPaths(args, outDir)
			if err != nil {
				return err
			}
			var post func(body []byte) (int, []byte, error)
			if url != "" {
				if apiKey == "" {
					apiKey = os.Getenv("TFC_API_KEY")
				}
				post = remote(strings.TrimSuffix(url, "/")+"/v1/ocr", apiKey)
			} else {
				o.Dir = dir
				o.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
				o.Backend = func() (device.Backend, error) { return newBackend(backend, precision) }
				srv, closeServer, err := server.Open(o)
				if err != nil {
					return err
				}
				defer closeServer()
				post = inProcess(srv)
			}
			var bar *progressbar.ProgressBar
			if st, err := os.Stderr.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
				bar = progressbar.NewOptions(len(args), progressbar.OptionSetWriter(os.Stderr), progressbar.OptionShowCount(),
					progressbar.OptionSetDescription("reading"), progressbar.OptionClearOnFinish())
			}
			for i, file := range args {
				if bar != nil {
					bar.Describe(filepath.Base(file))
				}
				md, err := readFile(post, file, ask)
				if err != nil {
					return err
				}
				if outDir == "" {
					_, err = io.WriteString(cmd.OutOrStdout(), md)
				} else {
					err = os.WriteFile(outs[i], []byte(md), 0o644)
				}
				if err != nil {
					return err
				}
				if bar != nil {
					bar.Add(1)
				}
			}
			return nil
		},
	}
	fl := c.Flags()
	fl.StringVar(&url, "url", "", "a running tfc serve, e.g. http://127.0.0.1:8000")
	fl.StringVar(&apiKey, "api-key", "", "the server's key (default $TFC_API_KEY)")
	fl.StringVar(&dir, "model", "", "a checkpoint folder to load here instead")
	fl.StringVar(&outDir, "out", "", "write FILE's markdown to DIR/NAME.md instead of stdout")
	fl.StringVar(&pages, "pages", "", "0-based pages to read, e.g. 0,2 (default: every page)")
	fl.StringVar(&task, "task", "", "one of the family's prompts by name, e.g. table for GLM-OCR (default: its first)")
	fl.StringVar(&prompt, "prompt", "", "the text each page is sent with, instead of the family's")
	fl.StringVar(&backend, "backend", "cpu", "with --model: device backend, cpu, cuda or hip")
	addPrecision(fl, &precision)
	fl.IntVar(&o.Parallel, "parallel", 4, "with --model: pages decoding at once")
	fl.IntVar(&o.Context, "context", 0, "with --model: tokens per page, prompt and output (default 8192, or the checkpoint's max_position_embeddings when smaller; a 200 DPI letter page is about 4,800 image tokens)")
	fl.IntVar(&o.MaxPages, "max-pages", server.DefaultMaxPages, "with --model: most pages a document may have")
	addCommand(c)
}

// parsePages reads --pages: comma-separated 0-based indices.
func parsePages(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("--pages %q: %q is not a page index; give 0-based indices such as 0,2", s, f)
		}
		out = append(out, n)
	}
	return out, nil
}

// outPaths names each file's markdown under dir; two files of one name are refused.
func outPaths(files []string, dir string) ([]string, error) {
	if dir == "" {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	out := make([]string, len(files))
	seen := map[string]string{}
	for i, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), filepath.Ext(f)) + ".md"
		if prev, ok := seen[name]; ok {
			return nil, fmt.Errorf("%s and %s would both be written to %s; read them in two runs", prev, f, filepath.Join(dir, name))
		}
		seen[name] = f
		out[i] = filepath.Join(dir, name)
	}
	return out, nil
}

// remote posts a body to a server's /v1/ocr.
func remote(endpoint, apiKey string) func([]byte) (int, []byte, error) {
	return func(body []byte) (int, []byte, error) {
		req, err := http.NewRequest("POST", endpoint, bytes.NewReader(body))
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		if apiKey != "" {
			req.Header.Set("Authorization", "Bearer "+apiKey)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, b, err
	}
}

// inProcess hands a body to a server's handler as POST /v1/ocr, without a network.
func inProcess(srv http.Handler) func([]byte) (int, []byte, error) {
	return func(body []byte) (int, []byte, error) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/v1/ocr", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		srv.ServeHTTP(rec, req)
		return rec.Code, rec.Body.Bytes(), nil
	}
}

// ocrRequest is the /v1/ocr body for a file, ask with its document: a PDF as a document_url, an
// image as an image_url.
func ocrRequest(file string, data []byte, ask server.OCRRequest) ([]byte, error) {
	req := ask
	req.Document = &server.OCRDocument{DocumentName: filepath.Base(file)}
	enc := func(mime string) json.RawMessage {
		b, _ := json.Marshal("data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(data))
		return b
	}
	switch image.Sniff(data) {
	case image.PNG:
		req.Document.Type, req.Document.ImageURL = "image_url", enc("image/png")
	case image.JPEG:
		req.Document.Type, req.Document.ImageURL = "image_url", enc("image/jpeg")
	case image.WebP:
		req.Document.Type, req.Document.ImageURL = "image_url", enc("image/webp")
	default: // a PDF, or what the server says is neither
		req.Document.Type, req.Document.DocumentURL = "document_url", enc("application/pdf")
	}
	return json.Marshal(req)
}

// readFile reads one file to markdown, its pages each after a line naming it.
func readFile(post func([]byte) (int, []byte, error), file string, ask server.OCRRequest) (string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	body, err := ocrRequest(file, data, ask)
	if err != nil {
		return "", err
	}
	status, reply, err := post(body)
	if err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	if status != http.StatusOK {
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		if json.Unmarshal(reply, &e) == nil && e.Error.Message != "" {
			return "", fmt.Errorf("%s: %s", file, e.Error.Message)
		}
		return "", fmt.Errorf("%s: the server answered %d: %s", file, status, reply)
	}
	var resp server.OCRResponse
	if err := json.Unmarshal(reply, &resp); err != nil {
		return "", fmt.Errorf("%s: the reply is not /v1/ocr's: %w", file, err)
	}
	var md strings.Builder
	for _, p := range resp.Pages {
		fmt.Fprintf(&md, "<!-- %s page %d -->\n%s\n\n", filepath.Base(file), p.Index+1, p.Markdown)
	}
	return md.String(), nil
}
