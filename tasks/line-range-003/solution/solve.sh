#!/bin/bash
sed -n '12,18p' /app/sage/proud_reef.txt > /app/excerpt.txt
