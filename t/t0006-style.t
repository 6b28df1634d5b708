#!/bin/sh
test_description='style: every C file of the tree is as clang-format leaves it

The project has one C style, .clang-format at the top of the tree (four
spaces, a space before every parenthesis of a call, 100 columns).  This
test runs Debian'"'"'s clang-format over every C source and header that git
knows, and names each file that would change (fix: clang-format -i FILE).'

. "$(dirname "$0")"/sharness.sh
ibcr_require CLANG_FORMAT

st_top=$SHARNESS_TEST_SRCDIR/..

test_expect_success 'the configuration is the tree'"'"'s own' '
	test -r "$st_top/.clang-format"
'

test_expect_success 'every C file is formatted' '
	( cd "$st_top" &&
	  if test -d .git || test -f .git; then
		git ls-files "*.c" "*.h"
	  else
		find . -name "*.[ch]" ! -path "./.git/*" ! -name "config.h" | sed "s|^\./||"
	  fi ) | sort >files &&
	test -s files &&
	: >unformatted &&
	while read -r f; do
		clang-format --style=file:"$st_top/.clang-format" "$st_top/$f" |
			cmp -s - "$st_top/$f" || echo "$f" >>unformatted
	done <files &&
	if test -s unformatted; then
		echo "not as clang-format leaves them (clang-format -i FILE):" &&
		cat unformatted && false
	fi
'

test_done
