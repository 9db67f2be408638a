#!/bin/bash
cd /app/lemon && for f in *.txt; do mv "$f" "${f%.txt}.md"; done
