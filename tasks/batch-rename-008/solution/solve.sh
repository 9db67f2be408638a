#!/bin/bash
cd /app/cedar && for f in *.tsv; do mv "$f" "${f%.tsv}.csv"; done
