#!/bin/bash
cd /app/oak && for f in *.tsv; do mv "$f" "${f%.tsv}.csv"; done
