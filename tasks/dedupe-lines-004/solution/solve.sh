#!/bin/bash
awk '!seen[$0]++' /app/marble.txt > /app/salmon_unique.txt
