#!/bin/bash
awk '!seen[$0]++' /app/meteor.txt > /app/unique.txt
