// SPDX-License-Identifier: MIT
// leaky.c - the demo: a little word-frequency table with three classic mistakes. heaplens
// finds each one and says why it is a leak.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry_s {
    char* word;
    int count;
    struct entry_s* next;
} entry_t;

static entry_t* table[64];
char* last_line; // still reachable: a global keeps it

static unsigned hash(const char* s) {
    unsigned h = 5381;
    while (*s)
        h = h * 33 + (unsigned char)*s++;
    return h % 64;
}

static __attribute__((noinline)) void count_word(const char* w) {
    entry_t** slot = &table[hash(w)];
    for (entry_t* e = *slot; e; e = e->next)
        if (!strcmp(e->word, w)) {
            e->count++;
            return;
        }
    entry_t* e = malloc(sizeof *e);
    e->word = strdup(w);
    e->count = 1;
    e->next = *slot;
    *slot = e;
}

// Mistake 1: the table is dropped without freeing its entries (one bucket's chain leaks: its
// head is definitely lost, what hangs off it indirectly).
static __attribute__((noinline)) void reset_table(void) { memset(table, 0, sizeof table); }

// Mistake 2: a copy that nobody frees.
static __attribute__((noinline)) char* shout(const char* s) {
    char* out = malloc(strlen(s) + 1);
    for (size_t i = 0;; i++)
        if (!(out[i] = (char)(s[i] >= 'a' && s[i] <= 'z' ? s[i] - 32 : s[i])))
            break;
    return out;
}

int main(void) {
    const char* text[] = {"the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog"};
    for (int round = 0; round < 3; round++)
        for (size_t i = 0; i < sizeof text / sizeof *text; i++)
            count_word(text[i]);
    printf("'the' seen %d times\n", table[hash("the")]->count);
    reset_table();
    for (int i = 0; i < 5; i++)
        printf("%s\n", shout(text[i])); // Mistake 2, five times
    last_line = strdup("kept until exit");
    // Mistake 3: freed twice.
    char* twice = strdup("oops");
    free(twice);
    free(twice);
    return 0;
}
