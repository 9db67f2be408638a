#!/bin/bash
cd /app/mint && for f in *.txt; do mv "$f" "${f%.txt}.md"; done
