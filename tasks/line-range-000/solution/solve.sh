#!/bin/bash
sed -n '11,18p' /app/goblet/grand_daisy.txt > /app/excerpt.txt
