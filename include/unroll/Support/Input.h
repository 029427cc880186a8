//===- Input.h - guards the tools put around parsing user files -*- C++ -*-===//
//
// MLIR's parser recurses once per nesting level of brackets, so a file of a
// few thousand nested parentheses overflows an 8 MB stack (SIGSEGV, upstream
// mlir-opt too). The tools therefore (1) reject text nested deeper than
// kMaxNesting with a located error before parsing, and (2) run their work on
// a thread whose stack is large enough for that depth
// (docs/robustness.md).
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_SUPPORT_INPUT_H
#define UNROLL_SUPPORT_INPUT_H

#include "llvm/ADT/StringRef.h"

#include <pthread.h>
#include <signal.h>

#include <functional>
#include <utility>

namespace mlir::unroll {

/// The deepest bracket nesting the tools parse.
constexpr unsigned kMaxNesting = 1000;
/// The stack the tools' work runs on: ample for kMaxNesting levels of any
/// construct (reserved address space; pages are touched only as used).
constexpr size_t kToolStackBytes = size_t(1) << 30;

/// Where MLIR text first nests brackets ((, [, {, <) deeper than `limit`,
/// outside string literals and `//` comments (`->` is not a bracket):
/// {line, column} (1-based), or {0, 0} if nowhere.
inline std::pair<unsigned, unsigned> findDeepNesting(llvm::StringRef text, unsigned limit) {
  unsigned line = 1, col = 0;
  long depth = 0;
  bool inString = false, inComment = false;
  char prev = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    ++col;
    if (c == '\n') {
      ++line;
      col = 0;
      inComment = false;
      inString = false; // MLIR strings do not span lines
      prev = c;
      continue;
    }
    if (inComment) {
      prev = c;
      continue;
    }
    if (inString) {
      if (c == '\\' && i + 1 < text.size()) { // an escape: skip the next byte
        ++i;
        ++col;
      } else if (c == '"') {
        inString = false;
      }
      prev = c;
      continue;
    }
    if (c == '"') {
      inString = true;
    } else if (c == '/' && prev == '/') {
      inComment = true;
    } else if (c == '(' || c == '[' || c == '{' || c == '<') {
      if (++depth > long(limit))
        return {line, col};
    } else if (c == ')' || c == ']' || c == '}' || (c == '>' && prev != '-')) {
      depth = depth > 0 ? depth - 1 : 0;
    }
    prev = c;
  }
  return {0, 0};
}

/// Runs `work` on a new thread with a stack of `bytes`, returning its
/// result; runs it on the calling thread if no such thread can be made.
///
/// LLVM installs a signal stack of its own (malloc'd) on the thread that
/// first registers its signal handlers, which is this one when the work
/// opens an output file. A runtime that owns the thread's signal stack
/// (AddressSanitizer maps one per thread and unmaps it at thread exit) must
/// find its own again, or it aborts on unmapping LLVM's buffer: the thread
/// puts back the signal stack it started with before it ends.
inline int runWithStack(const std::function<int()> &work, size_t bytes = kToolStackBytes) {
  struct Call {
    const std::function<int()> *work;
    int result = 1;
    static void *run(void *p) {
      auto *call = static_cast<Call *>(p);
      stack_t initial{};
      bool known = sigaltstack(nullptr, &initial) == 0;
      call->result = (*call->work)();
      if (known) {
        stack_t now{};
        if (sigaltstack(nullptr, &now) == 0 && now.ss_sp != initial.ss_sp) {
          initial.ss_flags &= SS_DISABLE;
          sigaltstack(&initial, nullptr);
        }
      }
      return nullptr;
    }
  } call{&work};
  pthread_attr_t attr;
  pthread_t thread;
  if (pthread_attr_init(&attr) == 0) {
    bool made = pthread_attr_setstacksize(&attr, bytes) == 0 &&
                pthread_create(&thread, &attr, &Call::run, &call) == 0;
    pthread_attr_destroy(&attr);
    if (made) {
      pthread_join(thread, nullptr);
      return call.result;
    }
  }
  return work();
}

} // namespace mlir::unroll

#endif // UNROLL_SUPPORT_INPUT_H
