// SPDX-License-Identifier: MIT
// report_sarif.h - the report as SARIF 2.1.0 (OASIS Static Analysis Results Interchange
// Format), which GitHub and GitLab code scanning and many editors read: one result per leak
// record and heap error, a rule per kind, the innermost frame in the program's own sources as
// the location and the whole stack as a code flow.
#ifndef HL_REPORT_SARIF_H
#define HL_REPORT_SARIF_H

#include <stdio.h>

#include "report.h"

// Writes the SARIF log of the context's model: leak records of the kinds o->show_kinds names
// (after o->supp), and every heap error. tool_version goes in the driver's version. Paths under
// the current directory are made relative to it (%SRCROOT%), others absolute file: URIs.
// Returns 0, or -1 when writing failed.
int report_sarif(FILE* out, report_ctx_t* c, const report_opts_t* o, const char* tool_version);

#endif
