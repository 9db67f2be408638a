#!/bin/bash
cd /app/mesa && for f in *.tsv; do mv "$f" "${f%.tsv}.csv"; done
