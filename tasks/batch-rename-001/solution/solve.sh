#!/bin/bash
cd /app/beacon && for f in *.txt; do mv "$f" "${f%.txt}.md"; done
