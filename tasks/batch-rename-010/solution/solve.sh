#!/bin/bash
cd /app/drum && for f in *.txt; do mv "$f" "${f%.txt}.md"; done
