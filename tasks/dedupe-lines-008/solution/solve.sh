#!/bin/bash
awk '!seen[$0]++' /app/drum.txt > /app/unique.txt
